"""The agents of agent.toml, made over one tool registry: ``[[agents]]``, or the single
``[agent]`` + ``[provider]`` as one agent."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from runtime import (
    BUILTIN_TOOLS,
    Agent,
    AgentEntry,
    Agents,
    BudgetConfig,
    ConfigError,
    Provider,
    ProviderConfig,
    Store,
    ToolRegistry,
    ToolView,
    Where,
    make_provider,
)
from runtime.tools.mcp import tool_prefix

from .config import MaidenConfig

__all__ = ["agent_lines", "make_agents", "may_use", "moved_threads"]


def may_use(entry: AgentEntry) -> Callable[[str], bool]:
    """Which tool names an agent may use: those it lists, its built-ins' and its MCP
    servers'; every tool when it names none."""
    if not entry.restricted:
        return lambda name: True
    names = set(entry.tools or ())
    for builtin in entry.builtins or ():
        names.update(BUILTIN_TOOLS[builtin])
    prefixes = tuple(tool_prefix(s) for s in entry.mcp_servers or ())
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
    servers = tuple(tool_prefix(s.name) for s in cfg.mcp_servers)
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


def agent_lines(cfg: MaidenConfig, agents: Agents) -> list[str]:
    """`maiden check`'s lines: each agent, its model and the tools it may use (with their
    effect classes), then the routes, in order."""
    lines = [f"  agents    {len(agents)}: " + ", ".join(
        f"{a.name} (default)" if a is agents.default else a.name for a in agents)]
    for agent in agents:
        entry = next((e for e in cfg.agents if e.name == agent.name), None)
        provider = cfg.agent_provider(entry)[1] if entry else cfg.provider
        model = f" {provider.model}" if provider.model else ""
        tools = ", ".join(f"{t.name} ({t.effect}{', asks' if t.requires_approval else ''})"
                          for t in agent.tools) or "none"
        servers = f"; MCP: {', '.join(entry.mcp_servers)}" if entry and entry.mcp_servers \
            else ""
        lines.append(f"    {agent.name}: {provider.kind}{model}, max_turns="
                     f"{agent.config.max_turns}; tools {tools}{servers}")
        if agent.description:
            lines.append(f"      {agent.description}")
    routes = [r.describe() for r in agents.routes]
    lines.append("  routes    " + ("; ".join(routes) + "; " if routes else "")
                 + f"everything else -> {agents.default.name}")
    return lines


async def moved_threads(store: Store, agents: Agents, *, limit: int = 1000
                        ) -> list[tuple[str, str, str]]:
    """Threads (of the ``limit`` most recent) whose place the routes now send to another
    agent than theirs: (thread, its agent, where the routes would send it). Each stays
    with its own agent; only new threads follow the routes."""
    moved = []
    for thread in await store.list_threads(limit=limit):
        newest = await store.list_runs(thread_id=thread.id, limit=1)
        if not newest:
            continue
        run = newest[0]
        own = run.agent or agents.default.name
        now = agents.route(Where.of(thread.id, run.origin,
                                    _schedule_of(run.idempotency_key)))
        if now != own:
            moved.append((thread.id, own, now))
    return moved


def _schedule_of(key: str | None) -> str | None:
    """The schedule whose slot a run's key names (``schedule:NAME:SLOT``), if any."""
    if key is None or not key.startswith("schedule:"):
        return None
    return key.split(":", 2)[1]
