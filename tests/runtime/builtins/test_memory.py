"""The ``memory`` built-ins (runtime/builtins/memory.py) through the loop, with the scripted
model: notes of a thread or of the agent, kept across restarts, a re-run call idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import (
    AssistantTurn,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolsConfig,
    make_tools,
)
from runtime.model.runs import idempotency_key
from tests.scripted import call


async def results(rt: Runtime, thread_id: str) -> list[ToolResult]:
    return [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]


def tools(tmp_path: Path, **settings: Any) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate(settings), tmp_path)


async def test_a_thread_remembers_across_runs_and_restarts(tmp_path: Path) -> None:
    script = [call("remember", key="standup", text="The team meets at 9:15, Mon-Thu."),
              {"text": "noted"},
              call("recall", query="when is the STANDUP"),
              {"text": "9:15"},
              call("forget", key="standup"), call("recall", query=""),
              {"text": "forgotten"}]
    registry = tools(tmp_path, builtins=["memory"])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), registry) as rt:
        await rt.send("t1", "remember the standup time")
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), tools(tmp_path, builtins=["memory"])) \
            as rt:
        run = await rt.send("t1", "when is standup?")
        assert run.reply == "9:15"
        other = await rt.send("t2", "and here?")  # another thread has its own notes
        await rt.send("t1", "forget it")
        found = await results(rt, "t1")
        assert found[0].content == {"remembered": "standup"}
        assert found[1].content["notes"] == [
            {"key": "standup", "text": "The team meets at 9:15, Mon-Thu."}]
        assert found[2].content == {"forgotten": "standup", "existed": True}
        assert found[3].content == {"notes": [], "total": 0}
        assert other.state == "completed"
        (t2_first,) = (await results(rt, "t2"))[:1]
        assert t2_first.content == {"remembered": "standup"}  # t2 started its own
        assert [n.scope for n in await rt.records.notes("thread:t2")] == ["thread:t2"]


async def test_agent_scope_and_limits(tmp_path: Path) -> None:
    script = [call("remember", key="a", text="x" * 11), call("remember", key="b", text="ok"),
              call("remember", key="c", text="no room"), call("remember", key="b", text="again"),
              {"text": "done"}]
    registry = tools(tmp_path, builtins=["memory"],
                     memory={"scope": "agent", "max_notes": 1, "max_chars": 10})
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), registry) as rt:
        await rt.send("t1", "remember things")
        too_long, first, full, replaced = await results(rt, "t1")
        assert too_long.is_error and "max_chars" in str(too_long.content)
        assert not first.is_error
        assert full.is_error and "max_notes" in str(full.content)
        assert not replaced.is_error  # an existing key can always be rewritten
        assert [(n.key, n.text) for n in await rt.records.notes("agent")] == [("b", "again")]


async def rerun_last_call(rt: Runtime, registry: ToolRegistry, thread_id: str) -> Any:
    """The thread's last tool call run again as the loop runs it after a crash cut it off
    before its result was recorded: the same tool, arguments and idempotency key."""
    turn = [e for e in await rt.records.entries(thread_id)
            if isinstance(e, AssistantTurn) and e.tool_calls][-1]
    run, call = await rt.records.get_run(turn.run_id), turn.tool_calls[-1]
    tool = registry.get(call.name)
    assert tool is not None
    ctx = ToolContext(run_id=run.id, thread_id=thread_id, tool_call_id=call.id,
                      idempotency_key=idempotency_key(run.id, call.id), origin=run.origin,
                      services={"notes": rt.notes})
    return await tool.invoke(ctx, tool.validate(call.arguments))


async def test_a_call_re_run_after_a_crash_changes_nothing_more(tmp_path: Path) -> None:
    # Two processes on one store, an agent-scope note each: t1's calls are re-run after
    # the other thread's writes, as if a crash had cut them off before their results.
    settings: dict[str, Any] = {"builtins": ["memory"], "memory": {"scope": "agent"}}
    ours, theirs = tools(tmp_path, **settings), tools(tmp_path, **settings)
    ours_script = ScriptedProvider([call("remember", key="k", text="v1"), {"text": "ok"},
                                    call("forget", key="k"), {"text": "ok"}])
    theirs_script = ScriptedProvider([call("remember", key="k", text="v2"), {"text": "ok"},
                                      call("remember", key="k", text="v3"), {"text": "ok"}])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ours_script, ours) as rt, \
            SQLiteStore(tmp_path / "m.db") as other_store, \
            Runtime(other_store, theirs_script, theirs) as other:

        async def texts() -> list[tuple[str, str]]:
            return [(n.key, n.text) for n in await rt.records.notes("agent")]

        await rt.send("t1", "remember v1")
        await other.send("t2", "remember v2")
        assert await rerun_last_call(rt, ours, "t1") == {"remembered": "k"}
        assert await texts() == [("k", "v2")]  # not v1 again, over the other thread's write
        (note,) = await rt.records.notes("agent")
        (theirs_result,) = await results(other, "t2")
        assert note.written_by == idempotency_key(theirs_result.run_id,
                                                  theirs_result.tool_call_id)

        await rt.send("t1", "forget it")
        await other.send("t2", "remember v3")
        assert await rerun_last_call(rt, ours, "t1") == {"forgotten": "k", "existed": True}
        assert await texts() == [("k", "v3")]  # the other thread's note is not removed
        assert [r.content for r in await results(rt, "t1")] == [
            {"remembered": "k"}, {"forgotten": "k", "existed": True}]
    ours_script.assert_complete()
    theirs_script.assert_complete()
