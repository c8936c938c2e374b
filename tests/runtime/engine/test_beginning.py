"""A run's first step in this process (runtime/engine/beginning.py), over a real SQLite
store written as an earlier process left it: a stop written before a crash ends a queued
run cancelled, a run released at a clean shutdown is continued, one a dead process was
driving is recovered, and one that keeps killing its process ends as a poison run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import Run, RunState, Runtime, ScriptedProvider, SQLiteStore, UserMessage
from runtime.engine.stops import record_stop
from runtime.model.runs import new_run_id, transition
from runtime.stores.base import Checkpoint

S = RunState


async def _left_running(store: SQLiteStore, owner: str | None, **changes: Any) -> Run:
    """A run an earlier process started (its message in the thread) and left running."""
    queued = Run(id=new_run_id(1000.0), thread_id="t", text="hello", created_at=1000.0)
    await store.create_run(queued)
    running, step = transition(queued, S.RUNNING, "started", owner=owner, first_entry=0,
                               started_at=1000.0, version=queued.version + 1, **changes)
    said = UserMessage(run_id=queued.id, text=queued.text, at=1000.0)
    await store.commit(Checkpoint(thread_id="t", position=0, entries=[said], run=running,
                                  transitions=[step]))
    return running


async def _reasons(rt: Runtime, run_id: str) -> list[str]:
    return [t.reason for t in await rt.records.transitions(run_id)]


async def test_a_stop_written_before_a_crash_cancels_the_queued_run(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        run = await store.create_run(Run(id=new_run_id(1000.0), thread_id="t", text="hi",
                                         created_at=1000.0))
        assert await record_stop(store, run.id, by="ann", key="req-1", at=1001.0)
        model = ScriptedProvider([{"text": "never said"}])
        async with Runtime(store, model) as rt:
            async with asyncio.timeout(10):
                ended = await rt.wait(run.id)
            entries = await rt.records.entries("t")
    assert (ended.state, ended.reason) == (S.CANCELLED, "cancelled by ann")
    assert model.calls == [] and entries == []  # it never entered the thread


async def test_a_run_released_at_a_clean_shutdown_is_continued(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        run = await _left_running(store, owner=None)
        async with Runtime(store, ScriptedProvider([{"text": "hi there"}])) as rt:
            async with asyncio.timeout(10):
                ended = await rt.wait(run.id)
            reasons = await _reasons(rt, run.id)
    assert (ended.state, ended.reply) == (S.COMPLETED, "hi there")
    assert "continued after restart" in reasons
    assert not any(r.startswith("recovered") for r in reasons)
    assert ended.recovery_attempts == 0


async def test_a_run_a_dead_process_was_driving_is_recovered(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        run = await _left_running(store, owner="dead-process")
        async with Runtime(store, ScriptedProvider([{"text": "hi there"}])) as rt:
            async with asyncio.timeout(10):
                ended = await rt.wait(run.id)
            reasons = await _reasons(rt, run.id)
    assert (ended.state, ended.reply) == (S.COMPLETED, "hi there")
    assert "recovered after crash (attempt 1)" in reasons
    assert (ended.recovery_attempts, ended.stalled_recoveries) == (1, 1)


async def test_a_run_that_keeps_killing_its_process_ends_as_a_poison_run(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        # Recovered three times (the default max_recovery_attempts), the thread not moved.
        run = await _left_running(store, owner="dead-process", recovery_attempts=3,
                                  stalled_recoveries=3, recovered_at=1)
        model = ScriptedProvider([{"text": "never said"}])
        async with Runtime(store, model) as rt:
            async with asyncio.timeout(10):
                ended = await rt.wait(run.id)
    assert (ended.state, ended.reason) == (S.FAILED, "poison_run")
    assert ended.error == ("the process died 3 times in a row while running this run; "
                           "giving up instead of crash-looping")
    assert model.calls == []


async def test_a_run_whose_thread_moved_on_between_crashes_is_not_poison(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        # Recovered at position 0, and the thread has an entry more since: progress.
        run = await _left_running(store, owner="dead-process", recovery_attempts=3,
                                  stalled_recoveries=3, recovered_at=0)
        async with Runtime(store, ScriptedProvider([{"text": "hi there"}])) as rt:
            async with asyncio.timeout(10):
                ended = await rt.wait(run.id)
    assert (ended.state, ended.recovery_attempts, ended.stalled_recoveries) == (
        S.COMPLETED, 4, 1)
