"""What a config builds (runtime/build.py): the store where its path says (relative to the
config's folder, ``~`` expanded) and said the same way in banners, and the tools, their
approval overrides naming a tool that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import ConfigError, FilesStore, SQLiteStore, ToolsConfig
from runtime.build import describe_store, make_store, make_tools, resolve
from runtime.model.config import StoreConfig


@pytest.mark.parametrize(("path", "expected"), [
    ("data/maiden.db", "/etc/bot/data/maiden.db"),
    ("/var/lib/maiden.db", "/var/lib/maiden.db"),
    ("~/maiden.db", str(Path.home() / "maiden.db")),
])
def test_a_store_is_opened_where_its_banner_says(path: str, expected: str) -> None:
    base = Path("/etc/bot")
    assert resolve(base, path) == Path(expected)
    for kind, made in (("sqlite", SQLiteStore), ("files", FilesStore)):
        cfg = StoreConfig(kind=kind, path=path)
        store = make_store(cfg, base)
        assert isinstance(store, made)
        assert describe_store(cfg, base) == f"{kind} at {expected}"


def test_a_postgres_store_needs_its_connection_string() -> None:
    cfg = StoreConfig(kind="postgres", dsn_env="PG_URL", pg_schema="team_a")
    with pytest.raises(ConfigError, match=r"\$PG_URL is not set"):
        make_store(cfg, Path("."), env={})
    assert describe_store(cfg, Path("."), env={}) == "postgres at $PG_URL (not set), " \
                                                      "schema team_a"


def test_tools_with_their_approval_overrides(tmp_path: Path) -> None:
    tools = make_tools(ToolsConfig(approval={"clock": True}), tmp_path)
    clock = tools.get("clock")
    assert [t.name for t in tools] == ["clock"] and clock is not None
    assert clock.requires_approval
    plain = make_tools(ToolsConfig(), tmp_path).get("clock")
    assert plain is not None and not plain.requires_approval
    with pytest.raises(ConfigError, match=r"tools\.approval\.deploy: no tool has that name"):
        make_tools(ToolsConfig(approval={"deploy": True}), tmp_path)
