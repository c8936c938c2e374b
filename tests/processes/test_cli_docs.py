"""What `maiden --help` and the docs say about the commands (docs/guides/operating.md) and
the config (docs/get-started/install.md) keep up with what the code does. (The generated
reference pages: tests/bot/test_reference.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing
from pathlib import Path

from runtime import StoreConfig

ROOT = Path(__file__).resolve().parents[2]
OPERATING = (ROOT / "docs/guides/operating.md").read_text()
INSTALL = (ROOT / "docs/get-started/install.md").read_text()


def _help(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "bot", *args, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_run_help_names_everything_it_serves() -> None:
    said = " ".join(_help("run").split())  # argparse wraps lines where it likes
    for part in ("HTTP API and console", "Slack", "Discord", "schedules"):
        assert part in said, said


def test_the_commands_table_lists_every_command() -> None:
    commands = re.findall(r"^    ([a-z]+) ", _help(), re.M)  # one per line under COMMAND
    section = OPERATING.split("\n## The commands\n", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([a-z]+)", section, re.M))
    expected = {"run", "chat", "send", "threads", "show", "runs", "approve", "resume",
                "cancel", "usage", "schedules", "files", "memory", "knowledge", "check",
                "migrate"}
    assert set(commands) == expected, commands
    assert rows == expected


def test_the_configuration_block_names_every_store_kind() -> None:
    kinds = typing.get_args(StoreConfig.model_fields["kind"].annotation)
    block = INSTALL.split("\n## The config file: `agent.toml`\n", 1)[1].split("\n## ", 1)[0]
    store = block.split("[store]", 1)[1].split("\n[", 1)[0]
    comment = store.split("kind =", 1)[1].split("\n", 1)[0].split("#", 1)[1]
    assert [k.strip() for k in comment.split("(")[0].split("|")] == list(kinds)
