"""`maiden run` started while its PostgreSQL server is out of reach waits for it (``[store]
open_wait_s``), as it waits for Slack or Discord, instead of exiting as if its config were
wrong (the chaos soak's surprise: a replica started in a cut exited with "configuration
error"). The server is cut off and let through by the soak's own TCP proxy (chaos/proxy.py);
a real `maiden run` process. A one-shot command does not wait; a server that stays out of
reach past ``open_wait_s`` stops `maiden run` with the error."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.postgres import cuttable, fresh_schema
from tests.processes.test_channels_down_at_boot import maiden_run
from tests.processes.test_postgres_cli import ROOT, maiden, use_postgres


def environ(dsn: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_PG_DSN": dsn}


async def test_maiden_run_waits_for_a_server_out_of_reach(home: Path) -> None:
    async with fresh_schema() as schema, cuttable() as (proxy, dsn):
        use_postgres(home, schema)
        proxy.cut()
        async with maiden_run(home, environ(dsn)) as (proc, out, err):
            waiting = await err.wait_for("is out of reach")
            # (the connection string is a secret: the log shows it redacted)
            assert f"the store (postgres at [redacted], schema {schema}) is out of reach (" \
                in waiting and "trying again in 0.5 s" in waiting, waiting
            assert proc.returncode is None
            # A one-shot command does not wait: it says what is wrong, at once.
            code, _, said = await maiden(home, "send", "t1", "hi", dsn=dsn)
            assert code == 2 and "store.dsn_env: cannot open the postgres store" in said
            proxy.restore()
            await out.wait_for("Ctrl-C stops.")
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0, err.text()


async def test_maiden_run_stops_once_open_wait_s_is_over(home: Path) -> None:
    async with fresh_schema() as schema, cuttable() as (proxy, dsn):
        use_postgres(home, schema)
        text = (home / "agent.toml").read_text()
        (home / "agent.toml").write_text(text.replace("[store]\n", "[store]\nopen_wait_s = 1\n",
                                                      1))
        proxy.cut()
        async with maiden_run(home, environ(dsn)) as (proc, _, err):
            assert await proc.wait() == 2
            await err.wait_for("(tried for 1 s)")
            assert "store.dsn_env: cannot open the postgres store" in err.text()
