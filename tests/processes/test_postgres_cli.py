"""The `maiden` command on a PostgreSQL store: check, send, show, and migrate from SQLite."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from runtime.stores.dsn import redact_dsn
from runtime.stores.postgres.schema import SCHEMA_VERSION
from tests.postgres import PG_DSN, fresh_schema

ROOT = Path(__file__).resolve().parents[2]


async def maiden(home: Path, *args: str, dsn: str = PG_DSN) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_PG_DSN": dsn},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def use_postgres(home: Path, schema: str) -> None:
    text = re.sub(r'(?m)^kind = "sqlite".*\n', "", (home / "agent.toml").read_text(), count=1)
    (home / "agent.toml").write_text(text.replace(
        "[store]\n", f'[store]\nkind = "postgres"\nschema = "{schema}"\n', 1))


async def test_check_send_show_and_migrate(home: Path) -> None:
    code, out, err = await maiden(home, "send", "t1", "kept in sqlite")
    assert code == 0, err
    async with fresh_schema() as schema:
        use_postgres(home, schema)
        code, out, err = await maiden(home, "check")
        assert code == 0, out + err
        assert f"store     postgres at {redact_dsn(PG_DSN)}, schema {schema}" in out
        assert "PostgreSQL 1" in out and f"maiden schema version {SCHEMA_VERSION}\n" in out
        assert "$MAIDEN_PG_DSN: set" in out

        code, out, err = await maiden(home, "migrate", "--from", "sqlite:data/maiden.db")
        assert code == 0, err
        assert "the counts match: 1 threads, 2 entries, 1 runs" in out
        code, out, err = await maiden(home, "send", "t1", "now in postgres")
        assert code == 0 and out == "echo: now in postgres\n", err
        code, out, err = await maiden(home, "show", "t1")
        assert code == 0 and "4 entries, 2 runs" in out and "kept in sqlite" in out
        code, _, err = await maiden(home, "migrate", "--from", "sqlite:data/maiden.db")
        assert code == 1 and "not empty" in err

        code, out, err = await maiden(home, "send", "t1", "x", dsn="")
        assert code == 2 and "store.dsn_env: $MAIDEN_PG_DSN is not set" in err
        code, out, err = await maiden(
            home, "check", dsn="postgresql://maiden:hunter2@127.0.0.1:1/nope")
        assert code == 1 and "FAILED to connect" in out and "hunter2" not in out + err
