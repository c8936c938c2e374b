"""A stop that takes long says what it waits on (``bot/stalls.py``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.stalls import awaiting, said_if_slow


async def _inner(gate: asyncio.Event) -> None:
    await gate.wait()


async def _outer(gate: asyncio.Event) -> None:
    await _inner(gate)


async def test_a_task_is_shown_down_to_what_it_awaits() -> None:
    gate = asyncio.Event()
    task = asyncio.create_task(_outer(gate), name="held")
    await asyncio.sleep(0)  # (it runs up to its first await)
    shown = awaiting(task)
    gate.set()
    await task
    steps = shown.split(" > ")
    assert [s.rsplit(" ", 1)[1] for s in steps[:3]] == ["_outer", "_inner", "wait"]
    assert steps[0].startswith("bot/test_stalls.py:")
    assert steps[-1] == "Future"


async def test_a_slow_stop_logs_what_still_runs_once(caplog: pytest.LogCaptureFixture) -> None:
    stop, gate = asyncio.Event(), asyncio.Event()
    held = asyncio.create_task(_outer(gate), name="maiden-held")
    watch = asyncio.create_task(said_if_slow(stop, after_s=0.01))
    stop.set()
    await asyncio.wait_for(watch, 10)  # it logs once, then ends
    gate.set()
    await held
    (said,) = [r for r in caplog.records if r.name == "maiden.app"]
    assert said.levelno == logging.WARNING
    assert said.getMessage().startswith("stopping has taken over 0 s; still running:\n")
    (line,) = [x for x in said.getMessage().splitlines() if "maiden-held" in x]
    assert "_outer > " in line and "_inner > " in line


async def test_nothing_is_said_of_a_stop_that_is_quick(caplog: pytest.LogCaptureFixture) -> None:
    stop = asyncio.Event()
    watch = asyncio.create_task(said_if_slow(stop, after_s=60))
    stop.set()
    await asyncio.sleep(0)
    watch.cancel()  # stopped in time
    with pytest.raises(asyncio.CancelledError):
        await watch
    assert not [r for r in caplog.records if r.name == "maiden.app"]
