"""``search_knowledge`` (runtime/builtins/knowledge.py) through the loop, with the scripted
model, over passages a real indexing pass stored: a run searches only the sources open to
its agent in its place, and each passage comes with where it is, to cite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    Origin,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolResult,
    ToolsConfig,
    make_tools,
)
from runtime.model.knowledge import KnowledgeConfig
from runtime.serving.knowledge import Indexer, KnowledgeSearch
from tests.scripted import call, error_type

SOURCES = [KnowledgeConfig(name="handbook", path="handbook"),
           KnowledgeConfig(name="ops", path="ops", agents=["maiden"], places=["slack:C1"]),
           KnowledgeConfig(name="sales", path="sales", agents=["helper"])]


def folders(root: Path) -> None:
    for name, text in (("handbook", "# Leave\n\nAsk your lead before a rollback of plans."),
                       ("ops", "# Deploys\n\n## Rollback\n\nRun make rollback."),
                       ("sales", "Rollback of a discount needs the sales lead.")):
        (root / name).mkdir()
        (root / name / "doc.md").write_text(text)


async def searched(rt: Runtime, thread_id: str) -> list[dict[str, Any]]:
    results = [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]
    return [r.content for r in results]


async def test_a_run_searches_only_what_its_agent_may_see_where_it_is(tmp_path: Path
                                                                       ) -> None:
    folders(tmp_path)
    # Each thread's run plays the script from its start (it goes by the history sent).
    provider = ScriptedProvider([call("search_knowledge", query="how do I roll back? rollback"),
                                 {"text": "done"}])
    tools = make_tools(ToolsConfig(builtins=["search_knowledge"]), tmp_path)
    agents = Agents([Agent(AgentConfig(name="maiden"), provider, tools),
                     Agent(AgentConfig(name="helper"), provider, tools)])
    async with SQLiteStore(tmp_path / "k.db") as store:
        await Indexer(store, SOURCES, tmp_path).index()
        async with Runtime(store, agents=agents,
                           services={"knowledge": KnowledgeSearch(store, SOURCES)}) as rt:
            await rt.send("cli", "rollback?")
            await rt.send("slack", "rollback?", origin=Origin(
                channel="slack", target={"channel": "C1"}, place=("C1",)))
            await rt.send("helper", "rollback?", agent="helper")
            cli, slack, helper = [(await searched(rt, t))[0]
                                  for t in ("cli", "slack", "helper")]
    assert cli["searched"] == ["handbook"]
    assert [p["source"] for p in cli["passages"]] == ["handbook"]
    assert slack["searched"] == ["handbook", "ops"]
    assert slack["passages"][0] == {
        "source": "ops", "path": "doc.md", "section": "Deploys > Rollback",
        "cite": "ops/doc.md, Deploys > Rollback", "text": "Run make rollback."}
    assert helper["searched"] == ["handbook", "sales"]
    provider.assert_complete()


async def test_nothing_open_is_said_and_a_bad_limit_is_refused(tmp_path: Path) -> None:
    sources = [KnowledgeConfig(name="ops", path="ops", places=["discord:1"])]
    script = [call("search_knowledge", query="rollback"),
              call("search_knowledge", query="rollback", limit=500), {"text": "done"}]
    tools = make_tools(ToolsConfig(builtins=["search_knowledge"]), tmp_path)
    async with SQLiteStore(tmp_path / "k.db") as store, \
            Runtime(store, ScriptedProvider(script), tools,
                    services={"knowledge": KnowledgeSearch(store, sources)}) as rt:
        await rt.send("t", "rollback?")
        results = [e for e in await rt.records.entries("t") if isinstance(e, ToolResult)]
    assert results[0].content["passages"] == []
    assert "no knowledge source is open" in results[0].content["note"]
    assert error_type(results[1]) == "exception"
