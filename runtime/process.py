"""Subprocesses for tools, cancelled properly: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass

__all__ = ["ProcessResult", "run_process"]


@dataclass(frozen=True, slots=True)
class ProcessResult:
    returncode: int
    stdout: str
    stderr: str


async def run_process(
    *argv: str,
    grace_s: float = 5.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> ProcessResult:
    """Run ``argv`` and return its output. If the awaiting task is cancelled (a run
    cancelled, a tool timeout), the process gets SIGTERM, then SIGKILL after ``grace_s``,
    and is reaped before the cancellation goes on."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    except BaseException:
        await _stop(proc, grace_s)
        raise
    return ProcessResult(proc.returncode or 0, out.decode(errors="replace"),
                         err.decode(errors="replace"))


async def _stop(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
