"""Spend caps (runtime/engine/caps.py) with two agents on one runtime: read from the store,
they refuse a person's, a place's or an agent's next message once the cap is spent, until
the period turns, or stop a run at its next turn; every replica's runs count."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from runtime import (
    CapConfig,
    ReplyDelivery,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    Usage,
)
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema
from tests.runtime.engine.two_agents import Model, slack, two_agents


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


NOON = 1_764_849_600.0  # 2025-12-04 12:00 UTC


def notices(deliveries: Sequence[object]) -> list[str]:
    return [d.text for d in deliveries if isinstance(d, ReplyDelivery)]


async def test_a_persons_daily_cap_refuses_the_next_message_once_until_midnight(
        tmp_path: Path) -> None:
    # Each turn costs 150 tokens at $1,000 per million: $0.15. The cap is $0.25 a day.
    clock = Clock(NOON)
    caps = [CapConfig(scope="user", cost_usd=0.25)]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(Model("a"), Model("b")), caps=caps,
                    clock=clock) as rt:
        origin = slack("C_SUP", user="U1")
        one = await rt.send("slack:T:C_SUP:1", "one", origin=origin)
        two = await rt.send("slack:T:C_SUP:2", "two", origin=origin)
        refused = await rt.send("slack:T:C_SUP:3", "three", origin=origin)
        other = await rt.send("slack:T:C_SUP:4", "four", origin=slack("C_SUP", user="U2"))
        said = notices(await rt.records.deliveries(run_id=refused.id))
        clock.now = NOON + 12 * 3600 + 1  # past midnight UTC: a new day
        next_day = await rt.send("slack:T:C_SUP:5", "five", origin=origin)
        entries = await rt.records.entries("slack:T:C_SUP:3")
    assert one.state is two.state is RunState.COMPLETED  # the second starts under the cap
    assert refused.state is RunState.FAILED and refused.reason == "spend_cap"
    assert said == ["Sorry, the daily spend cap for you is reached ($0.30 of $0.25). "
                    "It resets 2025-12-05 00:00 UTC."]
    assert entries == []  # the refused message never reached the model
    assert other.state is RunState.COMPLETED and next_day.state is RunState.COMPLETED


async def test_a_run_going_when_its_agents_cap_is_reached_stops_at_its_next_turn(
        tmp_path: Path) -> None:
    eng = Model("strong", usage=Usage(input_tokens=600, output_tokens=0), call="lookup")
    caps = [CapConfig(scope="agent", agent="eng", tokens=500, period="month")]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(Model("cheap"), eng), caps=caps,
                    clock=Clock(NOON)) as rt:
        run = await rt.send("eng-1", "look it up")
        after = await rt.send("slack:T:C_SUP:1", "support is not capped",
                              origin=slack("C_SUP"))
        said = notices(await rt.records.deliveries(run_id=run.id))
    assert run.state is RunState.FAILED and run.reason == "budget_exceeded"
    assert run.error == ("spend cap [[budgets]] scope agent, month: tokens = 500, spent 600")
    assert len(eng.asked) == 1  # the tool ran; the next turn was not asked for
    assert said == [] and after.state is RunState.COMPLETED  # no target: nothing to post


async def test_a_place_cap_counts_only_that_place(tmp_path: Path) -> None:
    caps = [CapConfig(scope="place", tokens=200)]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(Model("a"), Model("b")), caps=caps,
                    clock=Clock(NOON)) as rt:
        runs = [await rt.send(f"slack:T:C_SUP:{i}", "hi", origin=slack("C_SUP", f"U{i}"))
                for i in range(3)]
        elsewhere = await rt.send("slack:T:C_ENG:1", "hi", origin=slack("C_ENG"))
    assert [r.state for r in runs] == [RunState.COMPLETED, RunState.COMPLETED,
                                       RunState.FAILED]
    assert elsewhere.state is RunState.COMPLETED


async def test_a_runtime_indexes_the_spend_of_the_scopes_its_caps_name(
        tmp_path: Path) -> None:
    """An index is a page written for every new run: a store has one per scope capped."""
    def spend_indexes() -> set[str]:
        db = sqlite3.connect(tmp_path / "m.db")
        try:
            return {row[0] for row in db.execute(
                "SELECT name FROM sqlite_schema WHERE name LIKE 'runs_spend%'")}
        finally:
            db.close()

    async with SQLiteStore(tmp_path / "m.db") as store:
        async with Runtime(store, agents=two_agents(Model("a"), Model("b"))) as rt:
            await rt.send("t", "hi")
        assert spend_indexes() == set()
        caps = [CapConfig(scope="place", tokens=200), CapConfig(scope="user", tokens=300)]
        async with Runtime(store, agents=two_agents(Model("a"), Model("b")), caps=caps):
            assert spend_indexes() == {"runs_spend_place", "runs_spend_user"}


async def test_concurrent_messages_each_see_the_store(tmp_path: Path) -> None:
    """Caps are read from the store at each start: runs queued together in one thread
    are refused once the first has spent the cap."""
    caps = [CapConfig(scope="user", tokens=100)]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(Model("a"), Model("b")), caps=caps,
                    clock=Clock(NOON)) as rt:
        runs = [await rt.submit("slack:T:C_SUP:1", f"m{i}", origin=slack("C_SUP"))
                for i in range(3)]
        ended = await asyncio.gather(*(rt.wait(r.id) for r in runs))
    assert [r.state for r in ended] == [RunState.COMPLETED, RunState.FAILED, RunState.FAILED]


async def test_caps_count_every_replicas_runs_on_postgres() -> None:
    """Two processes on one PostgreSQL store: each counts what the other's runs spent
    (read from the runs, placed by the database's clock), not only its own."""
    async with fresh_schema() as schema:
        caps = [CapConfig(scope="user", tokens=400, period="month")]
        async with PostgresStore(PG_DSN, schema=schema, pool_size=4) as a_store, \
                PostgresStore(PG_DSN, schema=schema, pool_size=4) as b_store, \
                Runtime(a_store, agents=two_agents(Model("a"), Model("b")), caps=caps,
                        settings=RuntimeConfig(poll_interval_s=0.1)) as a, \
                Runtime(b_store, agents=two_agents(Model("a"), Model("b")), caps=caps,
                        settings=RuntimeConfig(poll_interval_s=0.1)) as b:
            origin = slack("C_SUP", user="U1")
            ran = [await rt.send(f"slack:T:C_SUP:{n}", "hi", origin=origin)
                   for n, rt in enumerate((a, b, a))]
            refused = [await rt.send(f"slack:T:C_SUP:{n}", "hi", origin=origin)
                       for n, rt in ((3, b), (4, a))]
            other = await b.send("slack:T:C_SUP:5", "hi", origin=slack("C_SUP", user="U2"))
    # 150 tokens a run: the third starts at 300 (two runs, one on each replica).
    assert [r.state for r in ran] == [RunState.COMPLETED] * 3
    assert [(r.state, r.reason) for r in refused] == [(RunState.FAILED, "spend_cap")] * 2
    assert other.state is RunState.COMPLETED
