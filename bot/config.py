"""agent.toml: parsed with tomllib, validated with pydantic, errors that name the key."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from channels.discord import DiscordConfig
from channels.http import HttpConfig, OpenAIApiConfig
from channels.slack import SlackConfig
from runtime import (
    BUILTIN_NAMES,
    PROCESS_WIDE,
    AgentConfig,
    AgentEntry,
    BudgetConfig,
    CapConfig,
    ConfigError,
    FilesConfig,
    KnowledgeConfig,
    KnowledgeIndexConfig,
    OtelConfig,
    ProviderConfig,
    ProviderEntry,
    RouteConfig,
    RuntimeConfig,
    StoreConfig,
    ToolsConfig,
)
from runtime.tools.mcp import McpServerConfig
from schedules.config import Schedule, ScheduleConfig, load_schedules
from schedules.hooks import Hook, HookConfig, load_hooks

__all__ = ["ChannelsConfig", "LoadedConfig", "MaidenConfig", "SchedulesLimits", "load_config",
           "parse_config"]


class ChannelsConfig(BaseModel):
    """``[channels.*]``: each chat channel's own section (absent: not configured)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack: SlackConfig | None = None
    discord: DiscordConfig | None = None


class SchedulesLimits(BaseModel):
    """``[schedules_limits]``: what chat may do with schedules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_per_thread: int = Field(default=10, ge=0, le=1000, description=(
        "schedules one conversation may create from chat; 0: the agent gets no schedule "
        "tools"))


class MaidenConfig(BaseModel):
    """The whole file. Later sections (schedules) slot in beside these."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: AgentConfig = AgentConfig()
    provider: ProviderConfig = ProviderConfig()
    budget: BudgetConfig = BudgetConfig()
    store: StoreConfig = StoreConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    tools: ToolsConfig = ToolsConfig()
    files: FilesConfig = FilesConfig()
    http: HttpConfig = HttpConfig()
    openai_api: OpenAIApiConfig = OpenAIApiConfig()
    otel: OtelConfig = OtelConfig()
    channels: ChannelsConfig = ChannelsConfig()
    schedules: list[ScheduleConfig] = []
    hooks: list[HookConfig] = []
    schedules_limits: SchedulesLimits = SchedulesLimits()
    mcp_servers: list[McpServerConfig] = []
    agents: list[AgentEntry] = []
    providers: list[ProviderEntry] = []
    routes: list[RouteConfig] = []
    budgets: list[CapConfig] = []
    knowledge: list[KnowledgeConfig] = []
    knowledge_index: KnowledgeIndexConfig = KnowledgeIndexConfig()

    def agent_names(self) -> list[str]:
        """The agents, in order: ``[[agents]]``, or the one of ``[agent]``."""
        return [a.name for a in self.agents] or [self.agent.name]

    def default_agent(self) -> str:
        """The agent that answers where no route matches."""
        return next((a.name for a in self.agents if a.default), self.agent_names()[0])

    def agent_provider(self, entry: AgentEntry) -> tuple[str, ProviderConfig]:
        """An agent's provider and the key it is configured at."""
        i = self.agents.index(entry)
        if isinstance(entry.provider, ProviderConfig):
            return f"agents.{i}.provider", entry.provider
        if isinstance(entry.provider, str):
            j, found = next((j, p) for j, p in enumerate(self.providers)
                            if p.name == entry.provider)
            return f"providers.{j}", found
        return "provider", self.provider

    def chat_channels(self) -> list[str]:
        """The chat channels configured and enabled (where schedules may deliver)."""
        found = {"slack": self.channels.slack, "discord": self.channels.discord}
        return [name for name, section in found.items()
                if section is not None and section.enabled]

    def read_schedules(self) -> list[Schedule]:
        """The ``[[schedules]]``, checked (``ConfigError`` naming each bad key)."""
        return load_schedules(self.schedules, default_timezone=self.agent.timezone,
                              channels=self.chat_channels())

    def read_hooks(self, env: Mapping[str, str] | None) -> list[Hook]:
        """The ``[[hooks]]``, checked, their secrets read from ``env`` (None: not yet)."""
        return load_hooks(self.hooks, env=env, channels=self.chat_channels())

    def secret_envs(self) -> dict[str, str]:
        """Every ``*_env`` key that is set: its key path -> the variable it names."""
        found: dict[str, str] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, DiscordConfig):
                if value.enabled:
                    found[f"{prefix}.token_env"] = value.token_env
            elif isinstance(value, SlackConfig):
                if value.enabled:  # only the variables its mode needs
                    for name in value.needed_envs():
                        key = next(k for k in type(value).model_fields
                                   if getattr(value, k) == name and k.endswith("_env"))
                        found[f"{prefix}.{key}"] = name
            elif isinstance(value, StoreConfig):
                if value.kind == "postgres":
                    found[f"{prefix}.dsn_env"] = value.dsn_env
            elif isinstance(value, BaseModel):
                for name in type(value).model_fields:
                    walk(f"{prefix}{name}" if not prefix else f"{prefix}.{name}",
                         getattr(value, name))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    walk(f"{prefix}.{i}", item)
            elif prefix.endswith("_env") and isinstance(value, str):
                found[prefix] = value

        walk("", self)
        for i, server in enumerate(self.mcp_servers):
            for key, name in server.needed_envs().items():
                found[f"mcp_servers.{i}.{key}"] = name
        return found


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: MaidenConfig
    path: Path
    exists: bool

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def parse_config(text: str, source: str = "agent.toml") -> MaidenConfig:
    """Validate a TOML document; raise ``ConfigError`` listing each bad key and why."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([("", f"not valid TOML: {exc}")], source) from None
    try:
        config = MaidenConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_problem(err, data) for err in exc.errors()], source) from None
    problems = _cross_checks(config)
    if problems:
        raise ConfigError(problems, source)
    return config


def _cross_checks(cfg: MaidenConfig) -> list[tuple[str, str]]:
    """Keys that are valid alone but not together."""
    problems = []
    if cfg.provider.kind == "scripted" and cfg.agent.max_context_tokens is not None:
        # The scripted provider finds its place in the script from the history it is sent.
        problems.append(("agent.max_context_tokens", "cannot be used with the scripted "
                         "provider (it replays its script by the history it is sent)"))
    for read in (cfg.read_schedules, lambda: cfg.read_hooks(None)):
        try:
            read()
        except ConfigError as exc:
            problems.extend(exc.problems)
    if cfg.hooks and not cfg.http.enabled:
        problems.append(("hooks", "webhooks arrive at POST /v1/hooks/{name}: they need the "
                         "HTTP API ([http] enabled = true)"))
    slack = cfg.channels.slack
    if slack is not None and slack.enabled and slack.mode == "http" and not cfg.http.enabled:
        problems.append(("channels.slack.mode", "\"http\" needs the HTTP API ([http] "
                         "enabled = true): Slack's events arrive at POST /slack/events"))
    problems += _agent_checks(cfg)
    first: dict[str, int] = {}
    for i, server in enumerate(cfg.mcp_servers):
        if server.name in first:
            problems.append((f"mcp_servers.{i}.name", f"{server.name!r} is already the name of "
                             f"mcp_servers.{first[server.name]}"))
        first.setdefault(server.name, i)
    return problems


def _agent_checks(cfg: MaidenConfig) -> list[tuple[str, str]]:
    """``[[agents]]``, ``[[providers]]``, ``[[routes]]`` and ``[[budgets]]`` against each
    other and the rest of the file: every name they use must exist."""
    problems = [*_unique("agents", [a.name for a in cfg.agents]),
                *_unique("providers", [p.name for p in cfg.providers]),
                *_unique("knowledge", [k.name for k in cfg.knowledge])]
    defaults = [i for i, a in enumerate(cfg.agents) if a.default]
    for i in defaults[1:]:
        problems.append((f"agents.{i}.default", f"agents.{defaults[0]} is already the default"))
    for i, entry in enumerate(cfg.agents):
        problems += _agent_entry_checks(cfg, i, entry)
    return problems + _agent_name_checks(cfg, list(dict.fromkeys(cfg.agent_names())))


def _unique(kind: str, listed: list[str]) -> list[tuple[str, str]]:
    """A problem for each name in ``listed`` (``[[kind]]`` entries) that an earlier one has."""
    problems: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(listed):
        if name in seen:
            problems.append((f"{kind}.{i}.name", f"{name!r} is already the name of "
                             f"{kind}.{seen[name]}"))
        seen.setdefault(name, i)
    return problems


def _agent_entry_checks(cfg: MaidenConfig, i: int, entry: AgentEntry
                        ) -> list[tuple[str, str]]:
    """``[[agents]]`` entry ``i``: what it sets that holds for every agent, and the
    provider, built-ins, MCP servers and tools it names."""
    problems: list[tuple[str, str]] = []
    for key in PROCESS_WIDE:
        if key in entry.model_fields_set:
            problems.append((f"agents.{i}.{key}", f"holds for every agent: set it in "
                             f"[agent] {key}"))
    providers = {p.name: p for p in cfg.providers}
    if isinstance(entry.provider, str) and entry.provider not in providers:
        listed = f" (there are: {', '.join(sorted(providers))})" if providers else ""
        problems.append((f"agents.{i}.provider", f"no [[providers]] entry is called "
                         f"{entry.provider!r}{listed}"))
    for name in entry.builtins or ():
        if name not in cfg.tools.builtins:
            problems.append((f"agents.{i}.builtins", f"{name!r} is not in [tools] builtins "
                             f"({', '.join(cfg.tools.builtins) or 'none'}): an agent may "
                             "use only the tools that are configured"))
    servers = {s.name for s in cfg.mcp_servers}
    for server in entry.mcp_servers or ():
        if server not in servers:
            problems.append((f"agents.{i}.mcp_servers", f"no [[mcp_servers]] entry is "
                             f"called {server!r}"))
    for tool in entry.tools or ():
        if tool in BUILTIN_NAMES and tool not in cfg.tools.builtins:
            problems.append((f"agents.{i}.tools", f"{tool!r} is a built-in that [tools] "
                             "builtins does not list"))
    provider = entry.provider if isinstance(entry.provider, ProviderConfig) else \
        providers.get(entry.provider or "", cfg.provider)
    if provider.kind == "scripted" and entry.settings(cfg.agent).max_context_tokens is not None:
        problems.append((f"agents.{i}.max_context_tokens", "cannot be used with the "
                         "scripted provider"))
    return problems


def _agent_name_checks(cfg: MaidenConfig, names: list[str]) -> list[tuple[str, str]]:
    """The agents (``names``) and schedules that ``[[routes]]``, ``[[schedules]]``,
    ``[[budgets]]`` and ``[[knowledge]]`` name must exist."""
    problems: list[tuple[str, str]] = []
    for i, route in enumerate(cfg.routes):
        if route.agent not in names:
            problems.append((f"routes.{i}.agent", f"no agent is called {route.agent!r} "
                             f"(the agents: {', '.join(names)})"))
        if route.schedule is not None and route.schedule not in {s.name for s in cfg.schedules}:
            problems.append((f"routes.{i}.schedule", f"no [[schedules]] entry is called "
                             f"{route.schedule!r}"))
    jobs: list[tuple[str, Sequence[ScheduleConfig | HookConfig]]] = [
        ("schedules", cfg.schedules), ("hooks", cfg.hooks)]
    for kind, entries in jobs:
        for i, job in enumerate(entries):
            if job.agent is not None and job.agent not in names:
                problems.append((f"{kind}.{i} ({job.name}).agent", f"no agent is called "
                                 f"{job.agent!r} (the agents: {', '.join(names)})"))
    for i, cap in enumerate(cfg.budgets):
        if cap.agent is not None and cap.agent not in names:
            problems.append((f"budgets.{i}.agent", f"no agent is called {cap.agent!r} "
                             f"(the agents: {', '.join(names)})"))
    for i, source in enumerate(cfg.knowledge):
        for agent in source.agents:
            if agent not in names:
                problems.append((f"knowledge.{i}.agents", f"no agent is called {agent!r} "
                                 f"(the agents: {', '.join(names)})"))
    return problems


def load_config(path: str | Path = "agent.toml") -> LoadedConfig:
    """Read and validate ``path``. A missing default file means all defaults; a missing
    file that was asked for by name is an error."""
    p = Path(path).expanduser().absolute()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if Path(path) == Path("agent.toml"):
            return LoadedConfig(MaidenConfig(), p, exists=False)
        raise ConfigError([("", "file not found")], str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([("", f"cannot read: {exc}")], str(path)) from None
    return LoadedConfig(parse_config(text, str(path)), p, exists=True)


def _problem(err: Any, data: dict[str, Any]) -> tuple[str, str]:
    key = _key(err["loc"], data)
    if err["type"] == "extra_forbidden":
        return key, "unknown key"
    if err["type"] == "missing":
        return key, "required key is missing"
    got = err.get("input")
    shown = f" (got {got!r})" if got is not None and not isinstance(got, dict | list) else ""
    return key, f"{err['msg']}{shown}"


def _key(loc: tuple[Any, ...], data: dict[str, Any]) -> str:
    """The dotted key of an error; a schedule's is named by its name too, as the checks
    after validation name it (``schedules.0 (standup).misfire``): its place in the file is
    not how people know it."""
    parts = [str(part) for part in loc]
    if len(loc) >= 2 and loc[0] == "schedules" and isinstance(loc[1], int):
        listed = data.get("schedules")
        item = listed[loc[1]] if isinstance(listed, list) and loc[1] < len(listed) else None
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name:
            parts[1] = f"{loc[1]} ({name})"
    return ".".join(parts)


def env_status(config: MaidenConfig) -> dict[str, bool]:
    """Which of the named secret variables are set in this environment."""
    return {var: bool(os.environ.get(var)) for var in config.secret_envs().values()}
