"""`maiden approve`, `resume` and `cancel`: act on a run, here or in the serving process."""

from __future__ import annotations

import argparse
from typing import Any

from runtime import RunState

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
    same store if one is alive (it may be holding the run); else it acts right here."""
    from ..app import open_runtime

    async with open_runtime(loaded, recover=False) as runtime:
        if kind == "decide":
            run = await runtime.decide(run_id, payload["tool_call_id"],
                                       approve=payload["approve"], by=payload["by"],
                                       reason=payload["reason"])
        elif kind == "resume":
            run = await runtime.resume(run_id)
        else:
            run = await runtime.cancel(run_id, by=payload["by"])
            print(f"run {run.id} {run.state}: {run.reason}")
            return EXIT_OK if run.state is RunState.CANCELLED else EXIT_FAILED
        run = await runtime.wait(run.id)
        await runtime.idle()  # messages queued behind it on the thread go now too
        return report(run)


COMMANDS = {"approve": _approve, "resume": _resume, "cancel": _cancel}
