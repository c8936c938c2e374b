"""`maiden run`'s recovery at start, said as it goes: every unfinished run found is taken up
(``Runtime.start``), one progress line as each ends or pauses, and what it came to.

A short recovery is over before the channels open, and the banner says what it came to
above "Ready". One that takes longer than ``[runtime] recovery_before_ready_s`` (a backlog of
runs after a kill, each with its model calls, one at a time under ``concurrency =
"global"``) goes on with the channels open: until then nothing would acknowledge Slack's
events, take Discord's messages or run a schedule's slot. Order holds: a recovered run is
its thread's oldest, and a thread's runs go one after another; a new message on another
thread may be answered first. Its last lines are printed when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TextIO

from runtime import MaidenError, Run, RunEnded, Runtime, StateChanged

from .opening import start_runtime

__all__ = ["Recovering", "recovery_lines"]

log = logging.getLogger("maiden.app")


class Recovering:
    """Recovery of the ``unfinished`` runs, begun at once in a task of its own."""

    def __init__(self, runtime: Runtime, unfinished: list[Run], out: TextIO, *,
                 wait_s: float) -> None:
        self._runtime = runtime
        self._unfinished = unfinished
        self._out = out
        self._wait_s = wait_s
        self._found = {run.id for run in unfinished}
        self._why: dict[str, str] = {}  # run id -> why it stopped short of an end, if it did
        self._waits: dict[str, str] = {}  # run id -> what it waits for (a file fetcher)
        self.recovered: list[Run] = []
        """The runs this process took up, as they ended up (once ``done``)."""
        self.left: list[tuple[Run, str]] = []
        """The other unfinished runs found, each with why it was not taken up here."""
        self.behind = False
        """Set once the channels opened before it ended: it prints its last lines itself."""
        if unfinished:
            _say(out, f"  recovering  {len(unfinished)} unfinished run(s)...")
        self._task = asyncio.create_task(self._recover(), name="maiden-recovery")

    @property
    def done(self) -> bool:
        return self._task.done()

    def going_on(self) -> str:
        """The banner's line while it goes on."""
        still = len(self._found) - len(self._why)
        return (f"  recovering  {still} of {len(self._found)} unfinished run(s) still, in the "
                "background (a thread's new messages are answered after them)")

    async def first(self, stop: asyncio.Event, within_s: float) -> bool:
        """Wait ``within_s`` at most for recovery to end (its error raised: a store out of
        reach for longer than `maiden run` waits, say), or leave it going on with the
        channels open (``behind``): True either way, the channels are to open; False if
        ``stop`` came first (the caller closes the runtime, and recovery ends at its runs'
        checkpoints: ``end``)."""
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([self._task, stopping], timeout=within_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if self._task.done():
            self._task.result()
            return True
        if stop.is_set():
            return False
        self.behind = True
        return True

    async def end(self) -> None:
        """After ``runtime.close()``: wait for the task (it ends at its runs' checkpoints).
        An error after the channels opened is logged here (what it did not finish is
        taken up again by the runtime's look for orphaned runs, or the next start); one
        before, ``first`` raised."""
        await asyncio.wait([self._task])
        exc = None if self._task.cancelled() else self._task.exception()
        if exc is not None and self.behind:
            log.error("recovery stopped: %s (what it did not finish is taken up again)",
                      exc, exc_info=None if isinstance(exc, MaidenError) else exc)

    async def _recover(self) -> None:
        runtime = self._runtime
        async with runtime.subscribe() as events:
            starting = asyncio.create_task(start_runtime(runtime, wait_s=self._wait_s))
            try:
                while not starting.done():
                    upcoming = asyncio.create_task(events.next())
                    await asyncio.wait([starting, upcoming],
                                       return_when=asyncio.FIRST_COMPLETED)
                    if upcoming.done():
                        self._heard(upcoming.result())
                    else:
                        upcoming.cancel()
                        await asyncio.gather(upcoming, return_exceptions=True)
                for event in events.ready():  # those that ended as recovery finished
                    self._heard(event)
            finally:
                if not starting.done():  # cancelled itself (the loop's end): so is start
                    starting.cancel()
                    with contextlib.suppress(BaseException):
                        await starting
        recovered = starting.result()
        taken = {run.id for run in recovered}
        left = []
        for run in self._unfinished:
            if run.id not in taken:
                now = await runtime.records.get_run(run.id)
                left.append((now, self._why.get(run.id) or self._waits.get(run.id)
                             or _not_taken(runtime, now)))
        self.recovered, self.left = recovered, left
        if self.behind:
            _say(self._out, "\n".join(recovery_lines(recovered, left)))

    def _heard(self, event: object) -> None:
        if isinstance(event, StateChanged) and event.run_id in self._found:
            self._waits[event.run_id] = event.reason
        if not isinstance(event, RunEnded) or event.run_id not in self._found:
            return
        self._why[event.run_id] = event.reason
        paused = f" ({event.reason})" if event.kind == "run.paused" else ""
        _say(self._out, f"    {len(self._why)}/{len(self._unfinished)} {event.run_id}: "
                        f"{event.state}{paused}")


def recovery_lines(recovered: Sequence[Run], left: Sequence[tuple[Run, str]] = ()) -> list[str]:
    """What recovery came to, counted as the "recovering N unfinished run(s)" line counts:
    every unfinished run found, those this process took up first, a line each."""
    if not left:
        lines = [f"  recovered   {len(recovered)} unfinished run(s)"]
    else:
        found = len(recovered) + len(left)
        lines = [f"  recovered   {len(recovered)} of {found} unfinished run(s); {len(left)} "
                 "not taken up here:"]
    lines += [f"    {run.id} on {run.thread_id!r}: {run.state} ({run.reason})"
              for run in recovered]
    lines += [f"    {run.id} on {run.thread_id!r}: {run.state} ({why})" for run, why in left]
    return lines


def _not_taken(runtime: Runtime, run: Run) -> str:
    """Why a run found unfinished was not taken up here, when no event said so."""
    if run.owner not in (None, runtime.operator.instance_id):
        return f"{run.reason}; another process took it up"
    return run.reason


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()
