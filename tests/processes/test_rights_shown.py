"""The effective access rules, as `maiden check`, the `maiden run` banner and the console's
Now page show them (one block per chat channel)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.banner import banner_tail
from bot.config import load_config
from bot.wiring import make_channels
from channels.http import HttpChannel
from runtime import (
    AgentConfig,
    EchoProvider,
    Records,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
)

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
[agent]
approvers = ["U_ANA", "U_BEN"]

[http]
port = 0

[channels.slack]
[[channels.slack.rules]]
place = "C0TEAM"
rights = ["talk", "operate"]
[[channels.slack.rules]]
place = "C0TEAM"
users = ["U_ANA", "U_BEN"]
rights = ["approve"]
[[channels.slack.rules]]
place = "C0OPS"
users = ["U_ANA", "U_CAT"]
rights = ["talk", "operate"]

[channels.discord]
allow_guilds = ["100"]
allow_users = ["7"]
"""

BLOCK = [
    "slack:",
    "  talk, operate: anyone in C0TEAM",
    "  approve: U_ANA, U_BEN in C0TEAM",
    "  talk, operate: U_ANA, U_CAT in C0OPS",
    "  and approve only for U_ANA, U_BEN ([agent] approvers)",
    "discord:",
    "  talk, approve, operate: 7 in 100",
    "  talk, approve, operate: 7 in a DM with the bot",
    "  and approve only for U_ANA, U_BEN ([agent] approvers)",
]
"""The block, in the order the rules apply (the shorthand's first, then ``rules``)."""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "agent.toml").write_text(CONFIG)
    return tmp_path / "agent.toml"


def framed(width: int) -> str:
    """``BLOCK`` as printed under a ``rights`` label ``width`` wide."""
    return "\n".join(f"  {'rights' if i == 0 else '':<{width}} {line}"
                     for i, line in enumerate(BLOCK))


def test_check_prints_the_rules(config: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_"))}
    done = subprocess.run([sys.executable, "-m", "bot", "--config", str(config), "check"],
                          capture_output=True, text=True, timeout=60,
                          env={**env, "PYTHONPATH": str(ROOT)})
    assert "Traceback" not in done.stderr
    assert done.returncode == 1  # the tokens are not set: said with the secrets
    assert "  slack     mode socket, api https://slack.com/api/, 3 access rules" in done.stdout
    assert framed(9) in done.stdout, done.stdout


def test_the_banner_prints_the_rules(config: Path) -> None:
    text = banner_tail(load_config(config), [])
    assert framed(11) in text, text


async def test_the_console_shows_the_rules(config: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DISCORD_BOT_TOKEN"):
        monkeypatch.setenv(name, "unused")  # the chat channels are not started here
    *_, prepare_http = make_channels(load_config(config))
    async with SQLiteStore(tmp_path / "m.db") as store:
        runtime = Runtime(store, EchoProvider(), ToolRegistry(()), agent=AgentConfig(),
                          settings=RuntimeConfig(poll_interval_s=0.1))
        http = prepare_http(Records(store)).make(runtime, None, None)
        assert isinstance(http, HttpChannel)
        async with runtime, http, \
                httpx.AsyncClient(base_url=http.url, timeout=10) as client:
            page = await client.get("/")
    assert page.status_code == 200
    rules = page.text.split('id="rules"', 1)[1].split("</dl>", 1)[0]
    assert "<dt>slack</dt>" in rules and "<dt>discord</dt>" in rules
    assert "<dd>talk, operate: U_ANA, U_CAT in C0OPS</dd>" in rules
    assert "<dd>talk, approve, operate: 7 in a DM with the bot</dd>" in rules
