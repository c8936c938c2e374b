"""The agents of agent.toml, made over one tool registry: ``[[agents]]``, or the single
``[agent]`` + ``[provider]`` as one agent."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from runtime import (
    Agent,
    Agents,
    BudgetConfig,
    ConfigError,
    Provider,
    ProviderConfig,
    ToolRegistry,
    ToolView,
    make_provider,
)
from runtime.agentconfig import AgentEntry
from runtime.builtins import BUILTIN_TOOLS

from .config import MaidenConfig

__all__ = ["make_agents", "may_use", "mcp_prefix"]


def mcp_prefix(server: str) -> str:
    """How the names of an MCP server's tools begin (``runtime.mcp.mapping.tool_name``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__")


def may_use(entry: AgentEntry) -> Callable[[str], bool]:
    """Which tool names an agent may use: those it lists, its built-ins' and its MCP
    servers'; every tool when it names none."""
    if not entry.restricted:
        return lambda name: True
    names = set(entry.tools or ())
    for builtin in entry.builtins or ():
        names.update(BUILTIN_TOOLS[builtin])
    prefixes = tuple(mcp_prefix(s) for s in entry.mcp_servers or ())
    return lambda name: name in names or (bool(prefixes) and name.startswith(prefixes))


def make_agents(cfg: MaidenConfig, base_dir: Path, tools: ToolRegistry,
                stack: AsyncExitStack) -> Agents:
    """Every agent over ``tools`` (the process's registry: each agent sees the part it may
    use). A provider named in ``[[providers]]`` is made once and shared; each one's client
    is closed with ``stack``. ``ConfigError`` names the key of a provider that cannot be
    made, or of a tool an agent names that no tool is."""
    made: dict[str, Provider] = {}

    def provider(key: str, config: ProviderConfig) -> Provider:
        if key not in made:
            try:
                made[key] = make_provider(config, base_dir)
            except ConfigError as exc:  # "provider.model" -> "agents.1.provider.model"
                raise ConfigError([(key + k.removeprefix("provider"), why)
                                   for k, why in exc.problems]) from None
            aclose = getattr(made[key], "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
        return made[key]

    if not cfg.agents:
        return Agents([Agent(cfg.agent, provider("provider", cfg.provider), tools, cfg.budget,
                             cfg.provider.prices)], cfg.routes)
    servers = tuple(mcp_prefix(s.name) for s in cfg.mcp_servers)
    agents = []
    for i, entry in enumerate(cfg.agents):
        for name in entry.tools or ():
            if name not in tools and not (servers and name.startswith(servers)):
                raise ConfigError([(f"agents.{i}.tools", f"no tool is called {name!r} (the "
                                    f"tools: {', '.join(sorted(t.name for t in tools))})")])
        key, config = cfg.agent_provider(entry)
        budget = cfg.budget if entry.budget is None else BudgetConfig.model_validate(
            {**cfg.budget.model_dump(), **entry.budget.model_dump(exclude_unset=True)})
        agents.append(Agent(entry.settings(cfg.agent), provider(key, config),
                            ToolView(tools, may_use(entry)), budget, config.prices,
                            entry.description))
    return Agents(agents, cfg.routes, cfg.default_agent())
