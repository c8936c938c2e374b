"""`maiden threads export` and `maiden threads delete`, run as real subprocesses on a real
store: the export is JSON lines with secrets redacted; a delete cancels a paused run first,
leaves nothing of the thread, and is idempotent."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-export-secret-0123456789"


def maiden(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_TEST_EXPORT_TOKEN": TOKEN}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env=env)


def rows_naming(db: Path, needle: str) -> list[str]:
    """Every row of every table that holds ``needle``."""
    found = []
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        for (table,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'"):
            found += [f"{table}: {row!r}" for row in conn.execute(f"SELECT * FROM {table}")
                      if needle in repr(row)]
    return found


def test_export_prints_the_thread_as_json_lines(home: Path) -> None:
    with (home / "agent.toml").open("a") as f:
        f.write('token_env = "MAIDEN_TEST_EXPORT_TOKEN"\n')  # in [http], the last table
    (home / "notes.txt").write_text("some notes")
    assert maiden(home, "send", "t1", f"the token is {TOKEN}", "--file",
                  "notes.txt").returncode == 0
    assert maiden(home, "send", "t1", '/tool clock {"tz": "UTC"}').returncode == 0
    assert maiden(home, "send", "t2", "another thread").returncode == 0

    exported = maiden(home, "threads", "export", "t1")
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["type"] for line in lines] == \
        ["thread"] + ["entry"] * 6 + ["run"] * 2 + ["file"]
    assert lines[0]["thread_id"] == "t1"
    assert lines[1]["entry"]["text"] == "the token is [redacted]"
    assert TOKEN not in exported.stdout and "another thread" not in exported.stdout
    assert lines[-1]["names"] == ["notes.txt"] and lines[-1]["stored"] is True

    missing = maiden(home, "threads", "export", "nobody")
    assert missing.returncode == 1 and missing.stdout == ""
    assert "no thread 'nobody'" in missing.stderr
    listed = maiden(home, "threads", "--limit", "1")
    assert listed.returncode == 0 and "'t2'" in listed.stdout


def test_delete_cancels_a_paused_run_and_leaves_nothing(home: Path) -> None:
    (home / "ops_tools.py").write_text(textwrap.dedent('''
        from runtime import tool

        @tool(effect="non_idempotent", requires_approval=True)
        def restart(service: str) -> str:
            """Restart a service."""
            return f"restarted {service}"
    '''))
    toml = (home / "agent.toml").read_text().replace("modules = []", 'modules = ["ops_tools"]')
    (home / "agent.toml").write_text(toml)
    (home / "notes.txt").write_text("only in t1")
    assert maiden(home, "send", "t1", "remember me", "--file", "notes.txt").returncode == 0
    paused = maiden(home, "send", "t1", '/tool restart {"service": "db"}')
    assert paused.returncode == 3 and "waiting for approval" in paused.stderr
    assert maiden(home, "send", "t2", "stays").returncode == 0

    deleted = maiden(home, "threads", "delete", "t1")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith("deleted thread 't1': ")
    assert "2 runs" in deleted.stdout and "1 file" in deleted.stdout
    db = home / "data" / "maiden.db"
    assert rows_naming(db, "t1") == [] and rows_naming(db, "remember me") == []
    assert "'t2'" in maiden(home, "threads").stdout

    again = maiden(home, "threads", "delete", "t1")
    assert again.returncode == 0 and again.stdout == "no thread 't1': nothing to delete\n"
    refused = maiden(home, "threads", "delete", "a\x1bb")
    assert refused.returncode == 2 and "control characters" in refused.stderr
