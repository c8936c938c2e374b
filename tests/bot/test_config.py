"""agent.toml: every error names the key and the reason; tools modules load from the config dir."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.config import load_config, parse_config
from runtime import (
    ConfigError,
    ScriptedProvider,
    describe_store,
    make_provider,
    make_store,
    make_tools,
)


@pytest.mark.parametrize(
    ("toml", "key", "reason"),
    [
        ("[agent]\nmax_turns = 'ten'", "agent.max_turns", "valid integer"),
        ("[agent]\nmax_turns = 0", "agent.max_turns", "greater than or equal to 1"),
        ("[agent]\nmax_turn = 3", "agent.max_turn", "unknown key"),
        ("[provider]\nkind = 'gpt'", "provider.kind", "'echo'"),
        ("[store]\nkind = 'redis'", "store.kind", "'sqlite'"),
        ("[store]\nkind = 'postgres'\nschema = 'Maiden; DROP'", "store.schema", "pattern"),
        ("[store]\npool_size = 0", "store.pool_size", "greater than or equal to 1"),
        ("[runtime]\nconcurrency = 'all'", "runtime.concurrency", "'global'"),
        ("[runtime]\nlease_ttl_s = 0", "runtime.lease_ttl_s", "greater than 0"),
        ("[provider]\nkind = 'openai'\nbase_url = 'http://127.0.0.1:Error/v1'",
         "provider.base_url", "is not a URL"),
        ("[provider]\nkind = 'openai'\nbase_url = 'localhost:11434'", "provider.base_url",
         "is not an http(s) URL"),
        ("[tools]\nmodules = 'mytools'", "tools.modules", "valid list"),
        ("[tools]\nbuiltins = ['telnet']", "tools.builtins.0", "'clock', 'http_fetch'"),
        ("[nonsense]\nx = 1", "nonsense", "unknown key"),
        ("agent = 5", "agent", "valid dictionary"),
    ],
)
def test_errors_name_the_key(toml: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(toml, "agent.toml")
    keys = [k for k, _ in info.value.problems]
    assert key in keys, info.value.problems
    message = str(info.value)
    assert f"agent.toml: {key}: " in message and reason in message


def test_several_problems_are_all_reported() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[agent]\nmax_turns = -1\nrepeat_limit = 'x'\n[store]\nkind = 1")
    assert {k for k, _ in info.value.problems} == {"agent.max_turns", "agent.repeat_limit",
                                                    "store.kind"}


def test_invalid_toml() -> None:
    with pytest.raises(ConfigError, match=r"not valid TOML.*line 2"):
        parse_config("[agent]\nname = \n")


def test_missing_named_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.toml")


def test_defaults_and_the_shipped_agent_toml() -> None:
    shipped = load_config(Path(__file__).resolve().parents[2] / "agent.toml")
    assert shipped.exists
    cfg = shipped.config
    assert cfg.provider.kind == "echo" and cfg.store.kind == "sqlite"
    assert cfg.store.path == "data/maiden.db" and cfg.runtime.concurrency == "global"
    assert parse_config("").agent.max_turns == 12


def test_secret_envs_are_listed() -> None:
    cfg = parse_config("[provider]\nkind = 'echo'\napi_key_env = 'MY_KEY'\n")
    assert cfg.secret_envs() == {"provider.api_key_env": "MY_KEY"}


def test_postgres_needs_its_connection_string() -> None:
    cfg = parse_config("[store]\nkind = 'postgres'\ndsn_env = 'PG_URL'\nschema = 'team_a'\n")
    assert cfg.store.pg_schema == "team_a"
    assert cfg.secret_envs() == {"store.dsn_env": "PG_URL"}
    assert parse_config("").secret_envs() == {}  # sqlite: no connection string to ask for
    with pytest.raises(ConfigError) as info:
        make_store(cfg.store, Path("."), env={})
    assert info.value.problems[0][0] == "store.dsn_env"
    assert "$PG_URL is not set" in str(info.value)
    dsn = "postgresql://maiden:hunter2@db.internal:5432/maiden"
    where = describe_store(cfg.store, Path("."), env={"PG_URL": dsn})
    assert where == "postgres at postgresql://maiden:***@db.internal:5432/maiden, schema team_a"


def test_scripted_provider_needs_a_readable_script(tmp_path: Path) -> None:
    cfg = parse_config("[provider]\nkind = 'scripted'")
    with pytest.raises(ConfigError, match=r"provider\.script"):
        make_provider(cfg.provider, tmp_path)
    (tmp_path / "s.json").write_text('[{"text": 5}]')
    cfg = parse_config("[provider]\nkind = 'scripted'\nscript = 's.json'")
    with pytest.raises(ConfigError, match=r"provider\.script.*s\.json.*text"):
        make_provider(cfg.provider, tmp_path)
    (tmp_path / "s.json").write_text('{"turns": [{"text": "hi"}]}')
    provider = make_provider(cfg.provider, tmp_path)
    assert isinstance(provider, ScriptedProvider)
    assert provider.turns[0].text == "hi"


def test_tools_modules_resolve_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "maiden_test_tools_a.py").write_text(textwrap.dedent('''
        from runtime import tool, ToolContext

        @tool(effect="non_idempotent", requires_approval=True)
        def deploy(ctx: ToolContext, service: str) -> str:
            """Deploy a service."""
            return service
    '''))
    cfg = parse_config("[tools]\nmodules = ['maiden_test_tools_a']\nbuiltins = []")
    registry = make_tools(cfg.tools, tmp_path)
    deploy = registry.get("deploy")
    assert deploy is not None and deploy.effect == "non_idempotent"
    assert "clock" not in registry


def test_tools_module_errors_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "maiden_test_tools_b.py").write_text("x = 1\n")
    (tmp_path / "maiden_test_tools_c.py").write_text("raise RuntimeError('bad import')\n")
    for module, expected in [("maiden_test_tools_b", "defines no @tool"),
                             ("maiden_test_tools_c", "bad import"),
                             ("maiden_no_such_module", "cannot import")]:
        cfg = parse_config(f"[tools]\nmodules = ['{module}']")
        with pytest.raises(ConfigError, match=expected) as info:
            make_tools(cfg.tools, tmp_path)
        assert info.value.problems[0][0] == "tools.modules"


def test_tools_approval_overrides(tmp_path: Path) -> None:
    cfg = parse_config("[tools.approval]\nclock = true\n")
    registry = make_tools(cfg.tools, tmp_path)
    clock = registry.get("clock")
    assert clock is not None and clock.requires_approval
    from runtime.builtins.clock import clock as shared

    assert not shared.requires_approval  # the module-level tool is left alone
    with pytest.raises(ConfigError) as info:
        make_tools(parse_config("[tools.approval]\nnope = true\n").tools, tmp_path)
    assert info.value.problems == [("tools.approval.nope", "no tool has that name")]


def test_scripted_provider_and_context_trimming_do_not_mix() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[provider]\nkind = 'scripted'\nscript = 's.json'\n"
                     "[agent]\nmax_context_tokens = 1000\n")
    assert info.value.problems[0][0] == "agent.max_context_tokens"
