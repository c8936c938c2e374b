"""The ``memory`` built-ins (runtime/builtins/memory.py) through a real runtime, the echo
model calling them (``/tool NAME {json}``) on SQLite: the scopes a person may write and
where each memory is recalled, who may forget, a re-run call that changes nothing more."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from runtime import (
    AssistantTurn,
    EchoProvider,
    Origin,
    Runtime,
    SQLiteStore,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolsConfig,
    make_tools,
)
from runtime.model.runs import idempotency_key
from runtime.serving.memories import Memories

TALK = ("talk",)
OPERATE = ("talk", "approve", "operate")


def slack(user: str, place: str, *, rights: tuple[str, ...] = TALK,
          private: bool = False) -> Origin:
    return Origin(channel="slack", user=user, place=(place,), direct=place.startswith("D"),
                  private=private or place.startswith("D"), rights=rights)


ANA_C1, BOB_C1 = slack("U1", "C1"), slack("U2", "C1")
ANA_C2, BOB_C2 = slack("U1", "C2"), slack("U2", "C2")
ANA_DM = slack("U1", "D1")


def tools(tmp_path: Path, **memory: Any) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate({"builtins": ["memory"], "memory": memory}),
                      tmp_path)


async def use(rt: Runtime, thread_id: str, origin: Origin, name: str, **args: Any) -> Any:
    """Have the echo model call a memory tool in ``thread_id``, sent from ``origin``; the
    call's result (an error result's content holds ``error``)."""
    run = await rt.send(thread_id, f"/tool {name} {json.dumps(args)}", origin=origin)
    assert run.state == "completed", run
    (result,) = [e for e in await rt.records.entries(thread_id)
                 if isinstance(e, ToolResult) and e.run_id == run.id]
    return result.content


def texts(found: Any) -> list[str]:
    return [m["text"] for m in found["memories"]]


async def test_each_scope_is_written_by_whom_it_may_be_and_recalled_where_it_may(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), tools(tmp_path)) as rt:
        kept = await use(rt, "s:C1:1", ANA_C1, "remember",
                         text="Deploys happen on Tuesdays", scope="place")
        assert kept["scope"] == "place" and kept["remembered"].startswith("m")
        refused = await use(rt, "s:C1:1", ANA_C1, "remember",
                            text="Everyone uses UTC", scope="workspace")
        assert "config does not allow workspace" in refused["error"]["message"]
        default = await use(rt, "s:C1:1", ANA_C1, "remember", text="This thread is on CI")
        assert default["scope"] == "thread"

        # Another thread of the same place sees the place memory; another place does not.
        seen = await use(rt, "s:C1:2", BOB_C1, "recall", query="when are deploys")
        assert texts(seen) == ["Deploys happen on Tuesdays"]
        (shown,) = seen["memories"]
        assert shown["scope"] == "place" and shown["id"] == kept["remembered"]
        assert shown["source"].startswith("slack:U1, slack #C1, ")
        assert texts(await use(rt, "s:C2:1", ANA_C2, "recall", query="deploys")) == []
        # A thread memory stays in its thread.
        assert texts(await use(rt, "s:C1:2", BOB_C1, "recall", query="CI")) == []
        assert texts(await use(rt, "s:C1:1", ANA_C1, "recall", query="CI")) == [
            "This thread is on CI"]


async def test_a_workspace_memory_needs_operate(tmp_path: Path) -> None:
    registry = tools(tmp_path, scopes=["thread", "place", "person", "workspace"])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), registry) as rt:
        refused = await use(rt, "s:C1:1", ANA_C1, "remember", text="UTC everywhere",
                            scope="workspace")
        assert "needs the operate right" in refused["error"]["message"]
        boss = slack("U9", "C1", rights=OPERATE)
        assert (await use(rt, "s:C1:1", boss, "remember", text="UTC everywhere",
                          scope="workspace"))["scope"] == "workspace"
        assert texts(await use(rt, "s:C2:1", BOB_C2, "recall", query="utc")) == [
            "UTC everywhere"]
        # Over HTTP there is no place: a place memory is refused, saying why.
        http = Origin(channel="http", user="ci", rights=("talk",))
        refused = await use(rt, "api-1", http, "remember", text="x", scope="place")
        assert "no place" in refused["error"]["message"]


async def test_private_and_person_memories_stay_where_they_may_be_seen(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), tools(tmp_path)) as rt:
        await use(rt, "s:D1", ANA_DM, "remember", text="Ana's salary review is in May",
                  scope="person")
        await use(rt, "s:C1:1", ANA_C1, "remember", text="Ana prefers short answers",
                  scope="person")
        # Learned in a DM: recalled in that DM only, not where Ana talks in a channel.
        assert texts(await use(rt, "s:C2:1", ANA_C2, "recall", query="Ana")) == [
            "Ana prefers short answers"]
        assert sorted(texts(await use(rt, "s:D1", ANA_DM, "recall", query="Ana"))) == [
            "Ana prefers short answers", "Ana's salary review is in May"]
        # A person's memory is recalled where that person is, not elsewhere.
        assert texts(await use(rt, "s:C2:2", BOB_C2, "recall", query="Ana")) == []
        await rt.send("s:C2:2", "hello", origin=ANA_C2)  # Ana joins that thread
        assert texts(await use(rt, "s:C2:2", BOB_C2, "recall", query="Ana")) == [
            "Ana prefers short answers"]


async def test_who_may_forget(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), tools(tmp_path)) as rt:
        first = (await use(rt, "s:C1:1", ANA_C1, "remember", text="The oncall is Bo",
                           scope="place"))["remembered"]
        second = (await use(rt, "s:C1:1", ANA_C1, "remember", text="Lunch at noon",
                            scope="place"))["remembered"]
        refused = await use(rt, "s:C1:2", BOB_C1, "forget", id=first)
        assert "only who said it" in refused["error"]["message"]
        # Not visible there: as if there were none.
        assert await use(rt, "s:C2:1", ANA_C2, "forget", id=first) == {
            "forgotten": first, "existed": False}
        assert await use(rt, "s:C1:2", ANA_C1, "forget", id=first) == {
            "forgotten": first, "existed": True}
        boss = slack("U9", "C1", rights=OPERATE)
        assert await use(rt, "s:C1:3", boss, "forget", id=second) == {
            "forgotten": second, "existed": True}
        assert texts(await use(rt, "s:C1:1", ANA_C1, "recall", query="")) == []


async def test_a_call_re_run_after_a_crash_changes_nothing_more(tmp_path: Path) -> None:
    registry = tools(tmp_path)
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), registry) as rt:
        kept = await use(rt, "s:C1:1", ANA_C1, "remember", text="The build is on Jenkins",
                         scope="place")
        # The call run again as the loop runs it after a crash cut it off before its
        # result was recorded: the same tool, arguments and idempotency key.
        turn = [e for e in await rt.records.entries("s:C1:1")
                if isinstance(e, AssistantTurn) and e.tool_calls][-1]
        run, call = await rt.records.get_run(turn.run_id), turn.tool_calls[-1]
        tool = registry.get(call.name)
        assert tool is not None
        ctx = ToolContext(run_id=run.id, thread_id=run.thread_id, tool_call_id=call.id,
                          idempotency_key=idempotency_key(run.id, call.id), origin=run.origin,
                          agent=run.agent,
                          services={"memories": Memories(store, time.time, runs=store)})
        assert await tool.invoke(ctx, tool.validate(call.arguments)) == kept
        found = await use(rt, "s:C1:1", ANA_C1, "recall", query="jenkins")
        assert texts(found) == ["The build is on Jenkins"]  # once
