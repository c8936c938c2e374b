"""The drivers of a runtime's agents (runtime/engine/drivers.py): each run driven by its
agent's driver, and a run whose agent left the config failed, resumable once it is back."""

from __future__ import annotations

from pathlib import Path

from runtime import Agent, AgentConfig, Agents, Run, RunState, Runtime, SQLiteStore
from tests.runtime.engine.two_agents import Model, two_agents


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


async def test_a_run_failed_for_its_agent_is_driven_by_it_once_it_is_back(tmp_path: Path
                                                                          ) -> None:
    db = tmp_path / "m.db"
    only = Agents([Agent(AgentConfig(name="support"), Model("a"))])
    run_id = "0" * 12 + "e" * 20
    async with SQLiteStore(db) as store:
        await store.create_run(Run(id=run_id, thread_id="eng-1", text="hi", agent="eng"))
        async with Runtime(store, agents=only) as rt:
            await rt.idle()
            assert (await rt.records.get_run(run_id)).reason == "unknown_agent"
        back = Model("strong-model")
        async with Runtime(store, agents=two_agents(Model("cheap-model"), back)) as rt:
            await rt.resume(run_id)
            done = await rt.wait(run_id)
    assert done.state is RunState.COMPLETED and done.reply == "strong-model answers"
    assert len(back.asked) == 1
