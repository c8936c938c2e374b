"""The banner's first lines say how shell commands are kept from maiden's secrets, the same
line `maiden check` prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.banner import banner_head
from bot.config import LoadedConfig, parse_config
from runtime import Runtime, ScriptedProvider, SQLiteStore, ToolRegistry, make_tools
from runtime.tools.isolation import bwrap_usable, choose_user, euid


@pytest.mark.parametrize("sandbox", ["auto", "off"])
async def test_the_banner_names_the_isolation_in_force(shared_tmp: Path, sandbox: str) -> None:
    cfg = parse_config(f'[tools]\nbuiltins = ["shell"]\n[tools.shell]\nsandbox = "{sandbox}"\n')
    loaded = LoadedConfig(cfg, shared_tmp / "agent.toml", exists=True)
    async with SQLiteStore(shared_tmp / "maiden.db") as store:
        runtime = Runtime(store, ScriptedProvider([]), make_tools(cfg.tools, shared_tmp))
        [line] = [ln for ln in banner_head(loaded, runtime).splitlines()
                  if ln.startswith("  isolation   ")]
    user = choose_user(euid(), "nobody")
    bwrap = sandbox == "auto" and bwrap_usable(user) is None
    assert line.startswith("  isolation   " + ("bubblewrap sandbox" if bwrap else "no sandbox"))
    assert (", as nobody (uid 65534)" if user else ", as maiden's own user") in line, line


async def test_without_the_shell_tool_the_banner_has_no_isolation_line(tmp_path: Path) -> None:
    loaded = LoadedConfig(parse_config(""), tmp_path / "agent.toml", exists=False)
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        runtime = Runtime(store, ScriptedProvider([]), ToolRegistry([]))
        assert "isolation" not in banner_head(loaded, runtime)
