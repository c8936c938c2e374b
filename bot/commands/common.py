"""What every command shares: the exit statuses, the usage error, and how a run that
a command waited for is reported."""

from __future__ import annotations

import json
import sys

from runtime import MaidenError, Run, RunState

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PAUSED", "EXIT_USAGE",
           "UsageError", "report"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(MaidenError):
    """A command line that cannot be carried out as typed (exit 2)."""


def report(run: Run) -> int:
    """Print where a run ended (its reply on stdout; anything else on stderr); the exit
    status that says it."""
    if run.state is RunState.COMPLETED:
        print(run.reply or "")
        return EXIT_OK
    if run.state is RunState.AWAITING_APPROVAL and run.pending_approval is not None:
        p = run.pending_approval
        print(f"run {run.id} is waiting for approval ({p.reason}) of {p.name} "
              f"{json.dumps(p.arguments, ensure_ascii=False)}:\n"
              f"  maiden approve {run.id} {p.tool_call_id}   (or --deny)", file=sys.stderr)
        return EXIT_PAUSED
    if run.state in (RunState.RUNNING, RunState.AWAITING_TOOL):
        print(f"run {run.id} is still {run.state} in the serving process; follow it with "
              f"`maiden runs --thread {run.thread_id!r}`", file=sys.stderr)
        return EXIT_OK
    if run.state is RunState.QUEUED:
        print(f"run {run.id} is queued: the thread has a run waiting for approval "
              "(see `maiden runs --state awaiting_approval`)", file=sys.stderr)
        return EXIT_PAUSED
    print(f"run {run.id} {run.state}: {run.reason}" + (f": {run.error}" if run.error else ""),
          file=sys.stderr)
    return EXIT_FAILED
