"""Several agents on one runtime: each run is driven by its thread's agent (its prompt,
model and tools), and a thread keeps the agent of its first run."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import (
    RouteConfig,
    RunError,
    RunState,
    Runtime,
    SQLiteStore,
)
from tests.runtime.engine.two_agents import Model, slack, two_agents


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


async def test_one_agent_records_no_name_and_reads_no_thread(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, Runtime(store, Model("m")) as rt:
        run = await rt.send("t1", "hi")
        assert (await rt.send("t1", "again", agent="maiden")).agent == ""
    assert run.agent == "" and run.reply == "m answers"
