"""Run events and their bus (runtime/model/events.py): who is offered what, what is kept
for a late follower, and how a run's end is told."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter

from runtime import Run, RunState
from runtime.model.events import (
    EventBus,
    RunEnded,
    RunEvent,
    StateChanged,
    TextDelta,
)

S = RunState


def _state(run_id: str, reason: str = "x") -> StateChanged:
    return StateChanged(run_id=run_id, thread_id="t", state=S.RUNNING, reason=reason)


def _end(run_id: str) -> RunEnded:
    return RunEnded(kind="run.completed", run_id=run_id, thread_id="t", state=S.COMPLETED,
                    reason="done")


def test_the_bus_keeps_the_events_of_the_runs_that_ended_last() -> None:
    bus = EventBus(ended=2)
    for n in range(3):
        bus.publish(StateChanged(run_id=f"r{n}", thread_id="t", state=S.RUNNING, reason="x"))
        assert bus.telling(f"r{n}")  # its end not told yet
        bus.publish(RunEnded(kind="run.completed", run_id=f"r{n}", thread_id="t",
                             state=S.COMPLETED, reason="done"))
    assert bus.kept_to_the_end("r0") is None  # the oldest gone
    assert not bus.telling("r2")
    assert [e.kind for e in bus.kept_to_the_end("r2") or []] == ["run.state", "run.completed"]
    # A run resumed: a new life, whose events are kept anew until it ends again.
    bus.publish(StateChanged(run_id="r2", thread_id="t", state=S.QUEUED, reason="resumed"))
    assert bus.kept_to_the_end("r2") is None


async def test_a_runs_subscription_gets_its_events_and_ends_with_its_end() -> None:
    bus = EventBus()
    async with bus.subscribe("r1") as events:
        bus.publish(_state("r1", "first"))
        bus.publish(_state("r2"))  # another run's
        bus.publish(TextDelta(run_id="r1", thread_id="t", text="hel"))
        bus.publish(_end("r1"))
        bus.publish(_state("r1", "after its end"))
        async with asyncio.timeout(10):
            got = [e async for e in events]
    assert [(e.kind, e.run_id) for e in got] == [
        ("run.state", "r1"), ("text.delta", "r1"), ("run.completed", "r1")]


async def test_a_late_subscriber_with_replay_sees_the_run_from_its_start() -> None:
    bus = EventBus()
    bus.publish(_state("r1", "one"))
    bus.publish(_state("r1", "two"))
    async with bus.subscribe("r1", replay=True) as replayed, bus.subscribe("r1") as live:
        bus.publish(_state("r1", "three"))
        assert [e.reason for e in replayed.ready()
                if isinstance(e, StateChanged)] == ["one", "two", "three"]
        assert [e.reason for e in live.ready() if isinstance(e, StateChanged)] == ["three"]


async def test_the_events_kept_of_a_run_are_bounded() -> None:
    bus = EventBus(keep=2, runs=2)
    for n in range(4):
        bus.publish(_state("r1", str(n)))
    bus.publish(_state("r2"))
    async with bus.subscribe("r1", replay=True) as events:
        assert [e.reason for e in events.ready() if isinstance(e, StateChanged)] == ["0", "1"]
    bus.publish(_state("r3"))  # a third run in progress: the oldest's events go
    assert not bus.telling("r1") and bus.telling("r2") and bus.telling("r3")


async def test_a_wait_is_offered_only_the_end() -> None:
    bus = EventBus()
    async with bus.subscribe("r1", ends_only=True) as mine, \
            bus.subscribe(ends_only=True) as every_end:
        bus.publish(_state("r1"))
        bus.publish(_end("r2"))
        bus.publish(_end("r1"))
        assert [e.run_id for e in mine.ready()] == ["r1"]
        assert [(e.kind, e.run_id) for e in every_end.ready()] == [
            ("run.completed", "r2"), ("run.completed", "r1")]


async def test_a_subscription_to_every_run_sees_every_event() -> None:
    bus = EventBus()
    async with bus.subscribe() as events:
        bus.publish(_state("r1"))
        bus.publish(_end("r1"))
        bus.publish(_state("r2"))
        assert [(e.kind, e.run_id) for e in events.ready()] == [
            ("run.state", "r1"), ("run.completed", "r1"), ("run.state", "r2")]


async def test_nothing_is_offered_after_a_subscription_is_left() -> None:
    bus = EventBus()
    async with bus.subscribe("r1") as events, bus.subscribe("r2", ends_only=True):
        assert sorted(bus.watched()) == ["r1", "r2"]
    assert bus.watched() == []
    bus.publish(_state("r1"))
    assert events.ready() == []


async def test_a_nudge_wakes_a_waiter_and_is_not_an_event() -> None:
    bus = EventBus()
    async with bus.subscribe("r1", ends_only=True) as events:
        events.nudge()
        async with asyncio.timeout(10):
            assert await events.next_or_nudge() is None
        events.nudge()
        bus.publish(_end("r1"))
        async with asyncio.timeout(10):
            assert (await events.next()).kind == "run.completed"  # the nudge skipped
        events.nudge()
        assert events.ready() == []


async def test_listeners_hear_every_event_until_stopped() -> None:
    bus = EventBus()
    heard: list[str] = []
    stop = bus.listen(lambda e: heard.append(e.run_id))
    bus.publish(_state("r1"))
    bus.publish(_end("r2"))
    stop()
    stop()  # a second stop changes nothing
    bus.publish(_state("r3"))
    assert heard == ["r1", "r2"]


@pytest.mark.parametrize(("state", "kind"), [
    (S.COMPLETED, "run.completed"), (S.FAILED, "run.failed"), (S.CANCELLED, "run.cancelled"),
    (S.TIMED_OUT, "run.timed_out"), (S.AWAITING_APPROVAL, "run.paused"),
    (S.QUEUED, "run.paused"), (S.RUNNING, "run.paused"),
])
def test_the_end_of_a_run_as_it_stands(state: RunState, kind: str) -> None:
    run = Run(id="r1", thread_id="t", text="hi", state=state, reason="why")
    ended = RunEnded.of(run)
    assert (ended.kind, ended.state, ended.reason, ended.run) == (kind, state, "why", run)
    assert RunEnded.of(run, "shutdown").reason == "shutdown"


def test_events_round_trip_through_json_by_their_kind() -> None:
    adapter: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
    run = Run(id="r1", thread_id="t", text="hi", state=S.COMPLETED, reply="hello")
    ended = RunEnded.of(run)
    data = adapter.dump_json(ended)
    assert b'"run"' not in data  # the run itself is for in-process waiters only
    back = adapter.validate_json(data)
    assert isinstance(back, RunEnded) and back.reply == "hello" and back.run is None
    delta = adapter.validate_python({"kind": "text.delta", "run_id": "r1", "thread_id": "t",
                                     "text": "hi"})
    assert delta == TextDelta(run_id="r1", thread_id="t", text="hi")
