"""What `maiden run` prints: the banner's first lines at once, the rest once it serves."""

from __future__ import annotations

from collections.abc import Sequence

from channels import Channel
from channels.http import HttpChannel
from runtime import Run, Runtime, describe_isolation, describe_store, maiden_version

from .config import LoadedConfig
from .recovering import recovery_lines
from .rights import rights_lines

__all__ = ["banner", "banner_head", "banner_tail"]


def banner_head(loaded: LoadedConfig, runtime: Runtime) -> str:
    """The banner's first lines, printed at once: what this process runs, from where."""
    cfg = loaded.config
    source = str(loaded.path) if loaded.exists else f"{loaded.path} (not found: defaults)"
    shell = cfg.tools.shell
    tools = runtime.operator.agents.default.tools
    return "\n".join([
        f"maiden {maiden_version()}: agent {cfg.agent.name!r}",
        f"  config      {source}",
        f"  provider    {cfg.provider.kind}" + (f" ({cfg.provider.model})"
                                                if cfg.provider.model else ""),
        f"  store       {describe_store(cfg.store, loaded.base_dir)}",
        f"  concurrency {cfg.runtime.concurrency}",
        f"  tools       {', '.join(t.name for t in tools) or 'none'}",
        *([f"  isolation   {describe_isolation(shell.sandbox, shell.run_as)}"]
          if "shell" in cfg.tools.builtins else []),
    ])


def banner_tail(
    loaded: LoadedConfig, recovered: list[Run], channels: Sequence[Channel] = (),
    schedules: Sequence[str] = (), mcp: Sequence[str] = (),
    left: Sequence[tuple[Run, str]] = (), going_on: str | None = None,
) -> str:
    """The banner's last lines, once recovery is done, the channels listen and the
    schedules are set (``schedules``: their lines; ``mcp``: each MCP server's status;
    ``left``: the unfinished runs found that this process did not take up, and why;
    ``going_on``: instead of what recovery came to, the line saying it goes on)."""
    cfg = loaded.config
    serving = {channel.name: channel.banner() for channel in channels}
    if not cfg.http.enabled:
        serving["http"] = "disabled ([http] enabled = false)"
    serving.setdefault("slack", "not configured (no [channels.slack])")
    serving.setdefault("discord", "not configured (no [channels.discord])")
    serving = {name: serving[name] for name in ("http", "slack", "discord") if name in serving}
    lines = [f"  {name:<11} {line}" for name, line in serving.items()]
    lines += rights_lines(cfg, 11)
    if not cfg.mcp_servers:
        mcp = ["not configured (no [[mcp_servers]])"]
    lines += [f"  {'mcp':<11} {line}" for line in mcp or [s.name for s in cfg.mcp_servers]]
    lines += schedules or ["  schedules   none"]
    lines += _knowledge_lines(loaded)
    lines += [going_on] if going_on else recovery_lines(recovered, left)
    urls = [c.url for c in channels if isinstance(c, HttpChannel)]
    where = f"over HTTP at {urls[0]}, " if urls else ""
    lines.append(f"Ready. Talk to it {where}with `maiden chat` or `maiden send THREAD TEXT`; "
                 "Ctrl-C stops.")
    return "\n".join(lines)


def _knowledge_lines(loaded: LoadedConfig) -> list[str]:
    """The ``[[knowledge]]`` sources and when they are indexed (none: no line)."""
    cfg = loaded.config
    if not cfg.knowledge:
        return []
    every = cfg.knowledge_index.every_minutes
    when = f"now, then every {every:g} min" if every else "now (once)"
    return [f"  knowledge   {', '.join(s.name for s in cfg.knowledge)}: indexed in the "
            f"background {when}"]


def banner(
    loaded: LoadedConfig, runtime: Runtime, recovered: list[Run],
    channels: Sequence[Channel] = (),
) -> str:
    """One screen: what this process serves, from where, and what it recovered."""
    return banner_head(loaded, runtime) + "\n" + banner_tail(loaded, recovered, channels)
