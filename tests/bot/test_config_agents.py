"""``[[agents]]``, ``[[providers]]``, ``[[routes]]`` and ``[[budgets]]`` in agent.toml: each
name they use must exist, each error names its key, and the single ``[agent]`` +
``[provider]`` of older files is one agent."""

from __future__ import annotations

import asyncio
import textwrap
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from bot.agents import make_agents
from bot.config import parse_config
from runtime import Agents, ConfigError, EchoProvider, ToolRegistry, make_tools
from runtime.providers.openai import OpenAIProvider

TWO = """
[agent]
system_prompt = "base prompt"
max_turns = 7
approvers = ["U_LEAD"]

[provider]
kind = "echo"

[tools]
builtins = ["clock", "shell", "memory"]

[[providers]]
name = "cheap"
kind = "openai"
model = "gpt-4.1-mini"
base_url = "http://127.0.0.1:9/v1"

[[agents]]
name = "support"
system_prompt = "You are careful support."
provider = "cheap"
builtins = ["clock"]
tools = ["recall"]

[[agents]]
name = "eng"
default = true
max_turns = 20
[agents.provider]
kind = "echo"
[agents.budget]
max_tool_calls = 3

[[routes]]
place = "C_SUPPORT"
agent = "support"
"""


def agents_of(toml: str, folder: Path) -> Agents:
    """The agents of ``toml``, with tools whose folder is ``folder`` (the shell tool's
    workdir: ``shared_tmp``, which the shell's user can enter when the suite runs as root)."""
    cfg = parse_config(textwrap.dedent(toml))

    async def made() -> Agents:
        async with AsyncExitStack() as stack:
            return make_agents(cfg, folder, make_tools(cfg.tools, folder), stack)

    return asyncio.run(made())


def test_each_agent_takes_agent_keys_it_leaves_out(shared_tmp: Path) -> None:
    agents = agents_of(TWO, shared_tmp)
    support, eng = agents
    assert agents.default is eng
    assert support.config.system_prompt == "You are careful support."
    assert support.config.max_turns == 7 and support.config.approvers == ["U_LEAD"]
    assert eng.config.system_prompt == "base prompt" and eng.config.max_turns == 20
    assert isinstance(support.provider, OpenAIProvider) and support.provider.model == \
        "gpt-4.1-mini"
    assert isinstance(eng.provider, EchoProvider)
    assert [t.name for t in support.tools] == ["clock", "recall"]
    assert [t.name for t in eng.tools] == ["clock", "shell", "remember", "recall", "forget"]
    assert eng.budget.max_tool_calls == 3 and support.budget.max_tool_calls is None


def test_an_old_file_is_one_agent_named_by_its_agent_section(tmp_path: Path) -> None:
    agents = agents_of('[agent]\nname = "helper"\n[provider]\nkind = "echo"\n', tmp_path)
    (only,) = agents
    assert only.name == "helper" and agents.default is only
    assert isinstance(only.tools, ToolRegistry) and only.config.system_prompt.startswith(
        "You are maiden")


@pytest.mark.parametrize(("extra", "key", "reason"), [
    ('[[routes]]\nagent = "ops"', "routes.1.agent",
     "no agent is called 'ops' (the agents: support, eng)"),
    ('[[routes]]\nschedule = "nightly"\nagent = "eng"', "routes.1.schedule",
     "no [[schedules]] entry is called 'nightly'"),
    ('[[budgets]]\nscope = "agent"\nagent = "ops"\ntokens = 5', "budgets.0.agent",
     "no agent is called 'ops'"),
    ('[[schedules]]\nname = "nightly"\ncron = "0 3 * * *"\nprompt = "x"\nagent = "ops"',
     "schedules.0 (nightly).agent", "no agent is called 'ops'"),
    ('[[agents]]\nname = "eng"', "agents.2.name", "'eng' is already the name of agents.1"),
    ('[[agents]]\nname = "x"\ndefault = true', "agents.2.default",
     "agents.1 is already the default"),
    ('[[agents]]\nname = "x"\nprovider = "dear"', "agents.2.provider",
     "no [[providers]] entry is called 'dear' (there are: cheap)"),
    ('[[agents]]\nname = "x"\nbuiltins = ["http_fetch"]', "agents.2.builtins",
     "'http_fetch' is not in [tools] builtins (clock, shell, memory)"),
    ('[[agents]]\nname = "x"\nmcp_servers = ["github"]', "agents.2.mcp_servers",
     "no [[mcp_servers]] entry is called 'github'"),
    ('[[agents]]\nname = "x"\ntimezone = "Europe/Paris"', "agents.2.timezone",
     "holds for every agent: set it in [agent] timezone"),
    ('[[agents]]\nname = "no spaces"', "agents.2.name", "pattern"),
    ('[[agents]]\nname = "x"\nmax_turn = 3', "agents.2.max_turn", "unknown key"),
    ('[[agents]]\nname = "x"\n[agents.budget]\nmax_cost = 1', "agents.2.budget.max_cost",
     "unknown key"),
    ('[[budgets]]\nscope = "user"', "budgets.0", "set tokens and/or cost_usd"),
    ('[[budgets]]\nscope = "user"\nplace = "C1"\ntokens = 1', "budgets.0.place",
     "only a cap of scope 'place' names a place"),
    ('[[knowledge]]\nname = "docs"\npath = "docs"\nagents = ["eng", "ops"]',
     "knowledge.0.agents", "no agent is called 'ops' (the agents: support, eng)"),
    ('[[knowledge]]\nname = "docs"\npath = "a"\n[[knowledge]]\nname = "docs"\npath = "b"',
     "knowledge.1.name", "'docs' is already the name of knowledge.0"),
    ('[[knowledge]]\nname = "Docs"\npath = "a"', "knowledge.0.name", "pattern"),
    ('[[knowledge]]\nname = "docs"', "knowledge.0",
     "give it a folder (path) or places whose shared files it takes (shared_in)"),
    ('[[knowledge]]\nname = "docs"\nshared_in = ["C0OPS"]', "knowledge.0.shared_in",
     "'C0OPS' is not a place"),
    ('[knowledge_index]\nevery_minutes = -1', "knowledge_index.every_minutes",
     "greater than or equal to 0"),
])
def test_a_name_that_does_not_exist_is_an_error_naming_its_key(
        extra: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(TWO) + "\n" + extra)
    problems = dict(caught.value.problems)
    assert key in problems, caught.value.problems
    assert reason in problems[key]


def test_a_tool_an_agent_names_must_be_configured(shared_tmp: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        agents_of(TWO.replace('tools = ["recall"]', 'tools = ["deploy"]'), shared_tmp)
    ((key, reason),) = caught.value.problems
    assert key == "agents.0.tools" and "no tool is called 'deploy'" in reason


def test_a_providers_missing_key_names_the_agents_key(shared_tmp: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    toml = TWO.replace('[agents.provider]\nkind = "echo"',
                       '[agents.provider]\nkind = "anthropic"\nmodel = "claude-sonnet-4-5"')
    with pytest.raises(ConfigError) as caught:
        agents_of(toml, shared_tmp)
    ((key, reason),) = caught.value.problems
    assert key == "agents.1.provider.api_key_env" and "ANTHROPIC_API_KEY" in reason


def test_the_guides_worked_example_is_a_valid_config(shared_tmp: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs/guides/agents-and-routes.md").read_text()
    example = guide.split("```toml\n", 1)[1].split("```", 1)[0]  # its worked example
    (shared_tmp / "tickets.py").write_text(textwrap.dedent('''
        from runtime import tool

        @tool
        def lookup_ticket(number: int) -> str:
            """A ticket."""
            return "open"

        @tool(effect="idempotent_write")
        def close_ticket(number: int) -> str:
            """Close a ticket."""
            return "closed"
    '''))
    monkeypatch.syspath_prepend(str(shared_tmp))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cfg = parse_config(example + "\n[channels.slack]\n")  # where the schedule delivers

    async def made() -> Agents:
        async with AsyncExitStack() as stack:
            return make_agents(cfg, shared_tmp, make_tools(cfg.tools, shared_tmp), stack)

    support, eng = asyncio.run(made())
    assert [t.name for t in support.tools] == ["clock", "http_fetch", "lookup_ticket"]
    assert "close_ticket" in [t.name for t in eng.tools] and support.budget.max_cost_usd == 0.05
    assert [r.agent for r in cfg.routes] == ["support"] * 3 and cfg.default_agent() == "eng"
