"""Several agents on one runtime: each run is driven by its thread's agent (its prompt,
model and tools), a thread keeps the agent of its first run, and spend caps read from the
store refuse the next message once, or stop a run at its next turn."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    BudgetConfig,
    CapConfig,
    ModelRequest,
    ModelResponse,
    Origin,
    Prices,
    ReplyDelivery,
    RouteConfig,
    Run,
    RunError,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolCall,
    ToolRegistry,
    ToolView,
    Usage,
    tool,
)
from runtime.providers.base import TextSink
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(effect="non_idempotent")
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@dataclass
class Model:
    """A model that remembers what it was asked (prompt, tools) and answers under its own
    name, spending ``usage`` per turn; with ``call``, its first turn calls that tool."""

    name: str
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=100, output_tokens=50))
    call: str | None = None
    asked: list[ModelRequest] = field(default_factory=list)

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        self.asked.append(request)
        if self.call is not None and len(self.asked) == 1:
            return ModelResponse(tool_calls=(ToolCall(id=f"c{len(self.asked)}", name=self.call,
                                                      arguments={"key": "k"}),),
                                 usage=self.usage, model=self.name)
        return ModelResponse(text=f"{self.name} answers", usage=self.usage, model=self.name)


def two_agents(support: Model, eng: Model, *, routes: tuple[RouteConfig, ...] = (),
               **budget: float) -> Agents:
    shared = ToolRegistry([lookup, deploy])
    return Agents([
        Agent(AgentConfig(name="support", system_prompt="You are careful support."), support,
              ToolView(shared, lambda name: name == "lookup"), BudgetConfig(**budget),
              Prices(input=1_000.0, output=1_000.0)),
        Agent(AgentConfig(name="eng", system_prompt="You are an engineer."), eng, shared,
              prices=Prices(input=1_000.0, output=1_000.0)),
    ], routes or (RouteConfig(place="C_ENG", agent="eng"),
                  RouteConfig(thread_prefix="eng-", agent="eng")))


def slack(channel: str, user: str = "U1") -> Origin:
    return Origin(channel="slack", target={"channel": channel}, user=user, place=(channel,))


async def test_each_thread_is_answered_by_the_agent_its_place_routes_to(tmp_path: Path
                                                                        ) -> None:
    support, eng = Model("cheap-model"), Model("strong-model")
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(support, eng)) as rt:
        first = await rt.send("slack:T:C_SUP:1", "help", origin=slack("C_SUP"))
        second = await rt.send("slack:T:C_ENG:1", "fix it", origin=slack("C_ENG"))
        third = await rt.send("eng-7", "over http")
    assert (first.reply, second.reply, third.reply) == (
        "cheap-model answers", "strong-model answers", "strong-model answers")
    assert (first.agent, second.agent, third.agent) == ("support", "eng", "eng")
    assert [r.system for r in support.asked] == ["You are careful support."]
    assert {r.system for r in eng.asked} == {"You are an engineer."}
    assert [t.name for t in support.asked[0].tools] == ["lookup"]
    assert sorted(t.name for t in eng.asked[0].tools) == ["deploy", "lookup"]


async def test_a_thread_keeps_its_agent_when_the_routes_change(tmp_path: Path) -> None:
    support, eng = Model("cheap-model"), Model("strong-model")
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store, Runtime(store, agents=two_agents(support, eng)) as rt:
        await rt.send("slack:T:C_ENG:1", "one", origin=slack("C_ENG"))
    # Now every place routes to support: the thread begun with eng stays with eng.
    everything = (RouteConfig(agent="support"),)
    async with SQLiteStore(db) as store, \
            Runtime(store, agents=two_agents(support, eng, routes=everything)) as rt:
        again = await rt.send("slack:T:C_ENG:1", "two", origin=slack("C_ENG"))
        fresh = await rt.send("slack:T:C_ENG:2", "three", origin=slack("C_ENG"))
        # Asked for by name (a schedule's agent, an OpenAI model), a thread still keeps its own.
        named = await rt.send("slack:T:C_ENG:1", "four", origin=slack("C_ENG"), agent="support")
    assert (again.agent, fresh.agent, named.agent) == ("eng", "support", "eng")
    assert len(eng.asked) == 3 and len(support.asked) == 1


async def test_a_tool_the_agent_may_not_use_is_refused_if_the_model_calls_it(tmp_path: Path
                                                                            ) -> None:
    support = Model("cheap-model", call="deploy")
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(support, Model("strong"))) as rt:
        run = await rt.send("slack:T:C_SUP:1", "deploy prod", origin=slack("C_SUP"))
        entries = await rt.records.entries(run.thread_id)
    result = next(e for e in entries if e.kind == "tool_result")
    assert result.is_error and "unknown_tool" in str(result.content)
    assert run.state is RunState.COMPLETED


async def test_an_agent_that_is_named_must_exist(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=two_agents(Model("a"), Model("b"))) as rt:
        with pytest.raises(RunError) as caught:
            await rt.submit("t1", "hi", agent="nobody")
    assert caught.value.reason == "unknown_agent" and "support" in str(caught.value)


async def test_a_thread_whose_agent_left_the_config_fails_resumably(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store, \
            Runtime(store, agents=two_agents(Model("a"), Model("b"))) as rt:
        await rt.send("eng-1", "hi")
    only = Agents([Agent(AgentConfig(name="support"), Model("a"))])
    async with SQLiteStore(db) as store:
        # One agent left: a runtime with one agent routes nothing, but a thread that
        # recorded another agent is still that agent's.
        await store.create_run(Run(id="0" * 12 + "f" * 20, thread_id="eng-1", text="again",
                                   agent="eng"))
        async with Runtime(store, agents=only) as rt:
            await rt.idle()
            run = await rt.records.get_run("0" * 12 + "f" * 20)
    assert run.state is RunState.FAILED and run.reason == "unknown_agent"
    assert "'eng'" in (run.error or "")


async def test_one_agent_records_no_name_and_reads_no_thread(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, Runtime(store, Model("m")) as rt:
        run = await rt.send("t1", "hi")
        assert (await rt.send("t1", "again", agent="maiden")).agent == ""
    assert run.agent == "" and run.reply == "m answers"


# -- spend caps ----------------------------------------------------------------------------


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
