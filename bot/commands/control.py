"""`maiden approve`, `resume` and `cancel`: act on a run, here or in the serving process."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runtime import Run, RunState, Runtime

from ..config import LoadedConfig
from .common import EXIT_FAILED, EXIT_OK, report

__all__ = ["COMMANDS"]


async def _approve(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "decide", args.run, tool_call_id=args.call,
                          approve=not args.deny, by=args.by, reason=args.reason)


async def _resume(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "resume", args.run)


async def _cancel(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "cancel", args.run, by=args.by)


async def _control(loaded: LoadedConfig, kind: str, run_id: str, **payload: Any) -> int:
    """Decide, resume or cancel. The runtime hands the request to a serving process on the
    same store if one is alive (it may be holding the run); else it acts right here.

    A decided or resumed run is waited for and printed as `maiden send` prints a run; then
    so is each message that was queued behind it on its thread (they go once it ends)."""
    from ..app import open_runtime

    async with open_runtime(loaded, recover=False) as runtime:
        if kind == "cancel":
            run = await runtime.cancel(run_id, by=payload["by"])
            print(f"run {run.id} {run.state}: {run.reason}")
            return EXIT_OK if run.state is RunState.CANCELLED else EXIT_FAILED
        behind = await _queued_behind(runtime, run_id)
        if kind == "decide":
            run = await runtime.decide(run_id, payload["tool_call_id"],
                                       approve=payload["approve"], by=payload["by"],
                                       reason=payload["reason"])
        else:
            run = await runtime.resume(run_id)
        run = await runtime.wait(run.id)
        code = report(run)
        if run.state is not RunState.AWAITING_APPROVAL:
            code = await _report_behind(runtime, behind, code)
        await runtime.idle()  # whatever this process took up reaches its end
        return code


async def _queued_behind(runtime: Runtime, run_id: str) -> list[Run]:
    """The runs queued on ``run_id``'s thread, oldest first: those waiting for it to end."""
    run = await runtime.records.get_run(run_id)
    queued = await runtime.records.runs(thread_id=run.thread_id, states=[RunState.QUEUED])
    return sorted((r for r in queued if r.id != run_id), key=lambda r: r.created_at)


async def _report_behind(runtime: Runtime, behind: list[Run], code: int) -> int:
    """Wait for each run that was queued behind the decided one, in order, and print it
    (a line on stderr says which message it answers); stop at one that pauses, for the
    rest wait behind it. The first status that is not 0, else 0."""
    for queued in behind:
        sys.stdout.flush()
        print(f"maiden: then run {queued.id}, the message queued behind it: "
              f"{_excerpt(queued.text)}", file=sys.stderr)
        ended = await runtime.wait(queued.id)
        shown = report(ended)
        code = code or shown
        sys.stdout.flush()
        if ended.state in (RunState.AWAITING_APPROVAL, RunState.QUEUED):
            break
    return code


def _excerpt(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 1] + "…")


COMMANDS = {"approve": _approve, "resume": _resume, "cancel": _cancel}
