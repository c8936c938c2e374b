"""Subprocesses for tools, stopped properly: SIGTERM, a grace period, then SIGKILL.

By default the child starts in a session (and process group) of its own, and stopping it
signals that whole group: a shell script's children and grandchildren go with it, not
just the shell. Whatever the way out - the command finished, its timeout passed, the
awaiting task was cancelled (a run cancelled, a tool timeout) - nothing of the group is
left running when ``run_process`` returns or re-raises.

Output is read as it comes, kept up to a cap per stream and the rest read and dropped:
a chatty command neither fills memory nor blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ProcessResult", "run_process"]

_CHUNK = 64 * 1024
_PIPE_DRAIN_S = 1.0
"""How long the pipes may stay open once the group is gone (a process that left the group,
a daemon, can hold them; it is not waited for)."""
_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ProcessResult:
    returncode: int
    """The exit status; ``-N`` when a signal N ended the process."""
    stdout: str
    stderr: str
    truncated: bool = False
    """Some output went past ``max_output_bytes`` and was dropped."""
    timed_out: bool = False
    """``timeout_s`` passed and the process was stopped; the output is what came before."""


async def run_process(
    *argv: str,
    grace_s: float = 5.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    new_session: bool = True,
    timeout_s: float | None = None,
    max_output_bytes: int | None = None,
    user: int | None = None,
    group: int | None = None,
) -> ProcessResult:
    """Run ``argv`` and return its output.

    With ``new_session`` (the default) the child leads a process group of its own, and
    every signal goes to the group. Once the command exits, anything it left running in
    the group is stopped too. After ``timeout_s`` the group gets SIGTERM, then SIGKILL
    after ``grace_s``, and the result says ``timed_out`` with the output so far. If the
    awaiting task is cancelled, the same happens before the cancellation goes on (a
    second cancellation during the grace period sends SIGKILL at once). Each of stdout
    and stderr is kept up to ``max_output_bytes``. Without ``stdin`` the child reads
    an empty input (never the agent's terminal). With ``user`` and ``group`` the child
    drops to them, with no supplementary groups, before it runs ``argv`` (this process
    must be root for that).
    """
    drop: dict[str, Any] = {} if user is None else {
        "user": user, "group": group, "extra_groups": []}
    proc, held = await _start(
        *argv, cwd=cwd, env=env, **drop,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=new_session)
    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    readers = [asyncio.create_task(out.read(proc.stdout)),
               asyncio.create_task(err.read(proc.stderr))]
    tasks = list(readers)
    if stdin is not None and proc.stdin is not None:
        tasks.append(asyncio.create_task(_feed(proc.stdin, stdin.encode())))
    timed_out = False
    try:
        if held is not None:
            raise held
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
                # A background child still holding the pipes is part of the command.
                await asyncio.wait(readers)
        except TimeoutError:
            timed_out = True
    finally:
        try:
            await _stop(proc, grace_s, group=new_session)
        finally:  # cancelled again while stopping: the pipes are still closed
            await _finish(proc, tasks)
    return ProcessResult(proc.returncode or 0, out.text(), err.text(),
                         truncated=out.cut or err.cut, timed_out=timed_out)


async def _start(
    *argv: str, **options: Any,
) -> tuple[asyncio.subprocess.Process, asyncio.CancelledError | None]:
    """Start the process; a cancellation meanwhile is held back and returned, to be raised
    once there is a process to stop. (Cut off while it connects the pipes, asyncio kills
    the child alone, and whatever the child has started by then is left running.)"""
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **options))
    held: asyncio.CancelledError | None = None
    while not starting.done():
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError as exc:
            held = held or exc
        except Exception:
            pass  # it failed to start: raised below
    if held is not None and (starting.cancelled() or starting.exception() is not None):
        raise held
    return starting.result(), held


class _Capture:
    """One output stream, kept up to ``cap`` bytes; the rest is read and dropped."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.cut = False

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_CHUNK):
            room = len(chunk) if self.cap is None else self.cap - len(self.kept)
            if room < len(chunk):
                self.cut = True
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        return self.kept.decode(errors="replace")


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _stop(proc: asyncio.subprocess.Process, grace_s: float, *, group: bool) -> None:
    """SIGTERM to what is left, SIGKILL after ``grace_s`` (or at once if cancelled
    meanwhile), and the child reaped."""

    def alive() -> bool:
        return _group_alive(proc.pid) if group else proc.returncode is None

    if alive():
        _signal(proc, signal.SIGTERM, group=group)
        try:
            await asyncio.wait_for(_until_gone(proc, alive), grace_s)
        except TimeoutError:
            pass
        finally:
            if alive():
                _signal(proc, signal.SIGKILL, group=group)
            await proc.wait()
    else:
        await proc.wait()


async def _until_gone(proc: asyncio.subprocess.Process, alive: Callable[[], bool]) -> None:
    await proc.wait()
    # The rest of the group are not our children: no exit to wait on, so look again.
    while alive():  # noqa: ASYNC110
        await asyncio.sleep(_POLL_S)


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (a zombie is not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # kill() counts zombies too. An orphan that died waits for pid 1 to reap it, and
    # some pid 1s never do (a container's own process), so on Linux look closer.
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(os.path.join(entry.path, "stat"), "rb") as f:
                    stat = f.read()
            except OSError:
                continue  # gone meanwhile
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


async def _finish(proc: asyncio.subprocess.Process, tasks: list[asyncio.Task[None]]) -> None:
    """Collect the last output and close the pipes, even if something outside the group
    still holds them."""
    try:
        await asyncio.wait(tasks, timeout=_PIPE_DRAIN_S)
    finally:
        for task in tasks:
            task.cancel()
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        await asyncio.gather(*tasks, return_exceptions=True)
