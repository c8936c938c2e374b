"""Workload 9's connection of its own to the PostgreSQL server: what the replicas'
connections are doing (``pg_stat_activity``, sampled), the server's counters, the phases'
hand-offs (from the runs the replicas wrote) and the check of every thread's entries."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from .handoffs import Handoffs, RunTimes, handoffs
from .replicas_cpu import client_ports
from .replicas_figures import DbActivity, Phase, ReplicasResult

__all__ = ["SAMPLE_S", "Db"]

SAMPLE_S = 0.25


class Db:
    """A connection of the bench's own to the server: activity samples and counters."""

    def __init__(self, conn: Any, server_port: int) -> None:
        self.conn = conn
        self.server_port = server_port

    async def counters(self) -> tuple[int, int] | None:
        """(commits in this database, WAL syncs) since the server's stats were reset."""
        try:
            commits = await self.conn.fetchval(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            syncs = await self.conn.fetchval("SELECT wal_sync FROM pg_stat_wal")
        except Exception:
            return None
        return int(commits), int(syncs)

    async def backends(self, pids: Sequence[int]) -> list[int]:
        """The server processes serving these processes' connections."""
        rows = await self.conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])",
            client_ports(pids, self.server_port))
        return [int(r["pid"]) for r in rows]

    async def sample(self, pids: Sequence[int], into: DbActivity, seen: set[int],
                     stop: asyncio.Event) -> None:
        while not stop.is_set():
            ports = client_ports(pids, self.server_port)
            rows = await self.conn.fetch(
                "SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity "
                "WHERE client_port = ANY($1::int[])", ports)
            into.samples += 1
            for row in rows:
                seen.add(int(row["pid"]))
                state, wait = row["state"] or "", row["wait_event_type"]
                into.connections += 1
                if state == "active":
                    if wait is not None:
                        into.waits[f"{wait}:{row['wait_event']}"] += 1
                    if wait is None:
                        into.running += 1
                    elif wait == "IO":
                        into.io += 1
                    elif wait == "Lock":
                        into.lock += 1
                    elif wait == "LWLock":
                        into.lwlock += 1
                    elif wait == "Client":
                        into.idle_in_transaction += 1
                    else:
                        into.other_wait += 1
                elif state.startswith("idle in transaction"):
                    into.idle_in_transaction += 1
                else:
                    into.idle += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)

    async def handoffs(self, schema: str, phase: Phase, pids: Sequence[int]) -> Handoffs:
        """The phase's hand-offs (``handoffs``), from its threads' runs and the replicas'
        heartbeats (which instance each replica is: by its pid)."""
        index = {pid: i for i, pid in enumerate(pids)}
        replica_of: dict[str, int] = {}
        for row in await self.conn.fetch(f'SELECT data FROM "{schema}".instances'):
            beat = json.loads(row["data"])
            if beat.get("pid") in index:
                replica_of[beat["id"]] = index[beat["pid"]]
        rows = await self.conn.fetch(
            f'SELECT thread_id, data FROM "{schema}".runs WHERE thread_id LIKE $1 '
            "ORDER BY created_at, n", phase.tag + "-%")
        runs = []
        for row in rows:
            run = json.loads(row["data"])
            runs.append(RunTimes(thread=row["thread_id"], created_at=run["created_at"],
                                 started_at=run.get("started_at"), ended_at=run["updated_at"],
                                 owner=run.get("owner")))
        return handoffs(phase.answered, runs, replica_of,
                        one_at_a_time=phase.mode == "global")

    async def check(self, schema: str, result: ReplicasResult) -> None:
        """Count the entries of every thread of the phases that ran to the end (four a
        message), and the runs' states."""
        expected = {p.tag + "-": 4 * p.messages for p in result.phases if not p.timed_out}
        try:
            counts = await self.conn.fetch(
                f'SELECT thread_id, count(*) AS n FROM "{schema}".entries '
                "WHERE thread_id LIKE 'bench-%' GROUP BY thread_id")
            result.checked_threads = sum(p.threads for p in result.phases if not p.timed_out)
            mine = 0
            result.wrong_threads = 0
            for r in counts:
                tag = r["thread_id"].rsplit("-", 1)[0] + "-"
                if tag in expected:
                    mine += 1
                    result.wrong_threads += r["n"] != expected[tag]
            result.wrong_threads += result.checked_threads - mine
            states = await self.conn.fetch(
                f'SELECT state, count(*) AS n FROM "{schema}".runs GROUP BY state')
            result.run_states = {r["state"]: int(r["n"]) for r in states}
        except Exception as exc:
            result.log_problems.append((1, f"bench: the check failed: {exc}"))
