"""The runtime's parts, built whole from its arguments (runtime/assembly.py): the agents it is
given, or the one agent made of a provider, tools and config; and the services each agent's
tools are given, checked as the runtime is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    EchoProvider,
    RunState,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    ToolResult,
    tool,
)
from runtime.assembly import agents_of
from tests.scripted import call

S = RunState


def test_one_agent_is_made_of_a_provider_tools_and_config() -> None:
    provider = EchoProvider()
    (only,) = agents_of(None, provider, None, AgentConfig(name="helper"), None, None)
    assert only.name == "helper" and only.provider is provider
    assert isinstance(only.tools, ToolRegistry) and len(only.tools) == 0


def test_agents_given_are_the_runtimes_and_exclude_one_agents_parts() -> None:
    agents = Agents([Agent(AgentConfig(name="support"), EchoProvider())])
    assert agents_of(agents, None, None, None, None, None) is agents
    with pytest.raises(ValueError, match="either agents, or one agent's provider"):
        agents_of(agents, EchoProvider(), None, None, None, None)
    with pytest.raises(ValueError, match="either agents"):
        agents_of(agents, None, ToolRegistry(), None, None, None)
    with pytest.raises(ValueError, match="a runtime needs a provider, or agents"):
        agents_of(None, None, None, AgentConfig(), None, None)


async def test_a_tool_gets_only_the_services_it_declares(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    @tool(needs=["notes"])
    async def noting(ctx: ToolContext) -> str:
        seen["services"] = sorted(ctx.services)
        await ctx.service("notes").remember(f"thread:{ctx.thread_id}", "k", "v",
                                            call=ctx.idempotency_key)
        return "kept"

    @tool
    async def plain(ctx: ToolContext) -> str:
        seen["plain"] = sorted(ctx.services)
        ctx.service("notes")  # not declared: the call fails with a reason
        return "unreachable"

    script = [call("noting"), call("plain"), {"text": "done"}]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), ToolRegistry([noting, plain]),
                    services={"extra": object()}) as rt:
        run = await rt.send("t", "go")
        results = [e for e in await rt.records.entries("t") if isinstance(e, ToolResult)]
        notes = await rt.records.notes("thread:t")
    assert run.state is S.COMPLETED
    assert seen == {"services": ["notes"], "plain": []}
    assert [(n.key, n.text) for n in notes] == [("k", "v")]
    assert results[1].is_error and "'notes' is not available to this tool" \
        in str(results[1].content)


async def test_a_runtime_is_not_built_without_a_service_a_tool_needs(tmp_path: Path) -> None:
    @tool(needs=["schedules"])
    def lister() -> str:
        """List."""
        return ""

    async with SQLiteStore(tmp_path / "m.db") as store:
        with pytest.raises(ToolDefinitionError, match="'lister' needs schedules"):
            Runtime(store, EchoProvider(), ToolRegistry([lister]))
