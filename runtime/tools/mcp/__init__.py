"""Tools from MCP servers (``[[mcp_servers]]`` in agent.toml), through the official SDK.

Each configured server is started with the process that drives runs and stopped with it;
its tools are offered to the model as ``{server}__{tool}``, with an effect class from the
tool's annotations (or the config), so recovery after a crash treats them like any other
tool. Modules: ``config`` (the keys), ``mapping`` (names, effects, results: pure),
``listing`` (tools from a listing), ``connection`` (the SDK), ``server`` (one server kept
running; errors), ``group`` (all of them; ``maiden check``).

The SDK is loaded only when a server is configured: this package and its ``config`` and
``mapping`` modules import nothing of it; ``open_servers`` and ``check_servers`` load it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .config import McpServerConfig
from .mapping import effect_from_hints, tool_name, tool_prefix

if TYPE_CHECKING:
    from .group import CheckReport, McpServers

__all__ = ["McpServerConfig", "check_servers", "effect_from_hints", "open_servers",
           "tool_name", "tool_prefix"]


def open_servers(
    configs: Sequence[McpServerConfig], base_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> McpServers:
    """The servers, to be entered (``async with``): started on entry, stopped on exit."""
    from .group import McpServers

    return McpServers(configs, base_dir, environ)


async def check_servers(
    configs: Sequence[McpServerConfig], base_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> list[CheckReport]:
    """``maiden check``: start each server, list its tools, stop it."""
    from .group import check_servers as check

    return await check(configs, base_dir, environ)
