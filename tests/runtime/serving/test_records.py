"""The runtime's records as they stand (runtime/serving/records.py): the reads a channel
or the console shows, over a real SQLite store, and the schedule records kept between
restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import Origin, RunState, ScheduleRecord, ScheduleRecords, SlotMark, SQLiteStore, tool
from tests.scripted import call

S = RunState



@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


async def test_reads_cover_what_adapters_show(make_runtime: Any) -> None:
    async with make_runtime([{"text": "one"}, {"text": "two"}]) as (rt, _):
        first = await rt.send("a", "hi")
        second = await rt.send("b", "hello")
        assert [t.id for t in await rt.records.threads()] == ["b", "a"]
        assert [r.id for r in await rt.records.runs()] == [first.id, second.id]
        assert [r.id for r in await rt.records.runs(thread_id="a")] == [first.id]
        assert [e.kind for e in await rt.records.entries("a")] == ["user", "assistant"]
        assert [t.target for t in await rt.records.transitions(first.id)] == \
            [S.RUNNING, S.COMPLETED]
        stats = await rt.records.stats()
        assert stats.threads == 2 and stats.runs == {S.COMPLETED: 2}


async def test_the_active_run_is_the_one_that_goes_first_and_approvals_are_by_channel(
        make_runtime: Any) -> None:
    room = Origin(channel="chat", target={"room": "r1"}, user="u1")
    async with make_runtime([call("deploy", env="prod"), {"text": "done"}],
                            [deploy]) as (rt, _):
        assert await rt.records.active_run("t") is None
        paused = await rt.send("t", "deploy", origin=room)
        behind = await rt.submit("t", "and then?")
        await rt.idle()
        assert await rt.records.active_run("t") == paused
        assert [r.id for r in await rt.records.runs(thread_id="t", states=[S.QUEUED])] == [
            behind.id]
        assert [r.id for r in await rt.records.pending_approvals()] == [paused.id]
        assert [r.id for r in await rt.records.pending_approvals(channel="chat")] == [
            paused.id]
        assert await rt.records.pending_approvals(channel="slack") == []
        await rt.cancel(paused.id)
        assert await rt.records.active_run("t") == await rt.records.get_run(behind.id)
        assert await rt.records.pending_approvals() == []


async def test_pages_of_runs_and_entries(make_runtime: Any) -> None:
    async with make_runtime([{"text": f"reply {i}"} for i in range(3)]) as (rt, _):
        runs = [await rt.send("t", f"m{i}") for i in range(3)]
        assert [r.id for r in await rt.records.runs(limit=2)] == [runs[1].id, runs[2].id]
        assert await rt.records.thread_length("t") == 6
        assert await rt.records.thread_length("never written") == 0
        page = await rt.records.entries("t", offset=2, limit=2)
        assert [getattr(e, "text", None) for e in page] == ["m1", "reply 1"]
        assert await rt.records.entries("never written") == []


async def test_a_run_is_found_by_its_idempotency_key(make_runtime: Any) -> None:
    async with make_runtime([{"text": "once"}]) as (rt, _):
        run = await rt.submit("t", "hi", idempotency_key="slack:Ev1")
        assert await rt.records.run_for_key("slack:Ev1") == await rt.records.get_run(run.id)
        assert await rt.records.run_for_key("slack:Ev2") is None
        await rt.wait(run.id)


def _record(name: str, since: float) -> ScheduleRecord:
    return ScheduleRecord(name=name, origin="chat", spec={"every": "1h"}, since=since)


async def test_schedule_records_are_kept_moved_only_forward_and_deleted(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        records = ScheduleRecords(store)
        assert await records.all() == []
        await records.save([_record("weekly", 10.0), _record("daily", 10.0)])
        assert [r.name for r in await records.all()] == ["daily", "weekly"]
        await records.advance([SlotMark(name="daily", since=20.0, last_slot=20.0,
                                        last_run_id="r2")])
        await records.advance([SlotMark(name="daily", since=15.0, last_slot=15.0,
                                        last_run_id="r1")])  # an older fire: no step back
        daily = next(r for r in await records.all() if r.name == "daily")
        assert (daily.since, daily.last_slot, daily.last_run_id) == (20.0, 20.0, "r2")
        assert await records.delete("weekly") is True
        assert await records.delete("weekly") is False
    async with SQLiteStore(tmp_path / "maiden.db") as reopened:
        assert [r.name for r in await ScheduleRecords(reopened).all()] == ["daily"]
