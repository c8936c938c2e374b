"""The PostgreSQL store's SQL: connection setup, checkpoint writes, and the queries that
are more than one line.

PostgreSQL's ``text`` cannot hold U+0000, which a thread id (or a note's key, or a tool
call's id) may contain. So every ``text`` value crosses the wire through a codec
(``configure``) that writes U+0000 as U+0001 U+0001 and U+0001 as U+0001 U+0002, and reads
them back: a prefix-free code that keeps the order of the UTF-8 bytes, so the ``"C"``
collation sorts ids as SQLite does. JSON text never holds either character raw (JSON
escapes control characters), so the stored documents are unchanged. Array parameters do
not go through the codec: only arrays of plain words (run states) are passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _text
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from ...errors import StaleWrite
from ...runs import TERMINAL, Delivery, RunState
from ..base import Checkpoint
from ..rows import activity, entry_row, pending_changed, positioned_rows, run_json, spend_of

__all__ = ["ERRORS", "LIST_THREADS", "CheckpointRows", "configure", "decode_text", "encode_text",
           "keep", "list_runs_sql", "update_pending", "write_checkpoint"]

ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
"""What asyncpg raises: the server's errors, a misused or lost connection, the network, a
connection that took too long to make."""


def encode_text(value: str) -> str:
    if "\x00" not in value and "\x01" not in value:
        return value
    return value.replace("\x01", "\x01\x02").replace("\x00", "\x01\x01")


_ESCAPED = re.compile("\x01([\x01\x02])")


def decode_text(value: str) -> str:
    if "\x01" not in value:
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m[1] == "\x01" else "\x01", value)


async def configure(conn: Any) -> None:
    """A new connection's setup: the ``text`` codec (see the module's docstring)."""
    await conn.set_type_codec("text", schema="pg_catalog", encoder=encode_text,
                              decoder=decode_text, format="text")


async def keep(conn: Any) -> None:
    """What a connection goes through when it returns to the pool, beyond asyncpg's rollback
    of an open transaction: nothing (the store sets nothing in a session, only ``SET LOCAL``
    in transactions, so asyncpg's ``RESET ALL`` and company would be a wasted round trip)."""


# -- checkpoints


@dataclass(frozen=True, slots=True)
class CheckpointRows:
    """A checkpoint turned into SQL parameters. ``entries`` end with each entry's own
    tokens (made the thread's running sums once its last row is known); ``steps`` are each
    run's transitions as JSON arrays' items, joined, ``mine`` those of ``run``'s run."""

    thread_id: str
    position: int | None
    entries: list[tuple[Any, ...]]
    run: tuple[Any, ...] | None
    mine: str | None
    steps: dict[str, str]
    deliveries: list[tuple[Any, ...]]

    @classmethod
    def of(cls, cp: Checkpoint) -> CheckpointRows:
        steps: dict[str, list[str]] = {}
        for t in cp.transitions:
            steps.setdefault(t.run_id, []).append(
                f"[{_text(t.source)},{_text(t.target)},{_text(t.reason)},{t.at!r}]")
        joined = {run_id: ",".join(items) for run_id, items in steps.items()}
        run = None
        if cp.run is not None:
            run = (cp.run.state, cp.run.version, run_json(cp.run), activity(cp), cp.run.id,
                   cp.run.version - 1, *spend_of(cp.run))
        return cls(
            thread_id=cp.thread_id,
            position=cp.position,
            entries=[entry_row(cp.thread_id, (cp.position or 0) + i, entry)
                     for i, entry in enumerate(cp.entries)],
            run=run,
            mine=None if cp.run is None else joined.pop(cp.run.id, None),
            steps=joined,
            deliveries=[(d.key, d.run_id, d.remote_id, d.created_at, d.model_dump_json())
                        for d in cp.deliveries],
        )


def _appended(param: str) -> str:
    """``transitions`` with the items in ``param`` (JSON text) appended."""
    return (f"CASE WHEN transitions = '[]' THEN '[' || {param} || ']' "
            f"ELSE left(transitions, -1) || ',' || {param} || ']' END")


_UPDATE_RUN = (
    "UPDATE runs SET state = $1, version = $2, data = $3, active = coalesce($4, active), "
    "spend_tokens = $7, spend_cost = $8, "
    f"transitions = CASE WHEN $9::text IS NULL THEN transitions ELSE {_appended('$9')} END "
    "WHERE id = $5 AND version = $6 RETURNING true")


async def write_checkpoint(conn: Any, cp: CheckpointRows) -> None:
    """The checkpoint's writes, in the caller's transaction: all of them, or ``StaleWrite``
    (or another error) and the caller rolls back."""
    if cp.position is not None:
        # The thread's row is locked first, so two writers on one thread take turns; the
        # second then sees the first's rows (each statement reads what is committed).
        known = await conn.fetchval("SELECT true FROM threads WHERE id = $1 FOR UPDATE",
                                    cp.thread_id)
        last = await conn.fetchrow("SELECT seq, tokens FROM entries WHERE thread_id = $1 "
                                   "ORDER BY seq DESC LIMIT 1", cp.thread_id)
        rows = positioned_rows(cp.thread_id, cp.position, cp.entries,
                               None if last is None else (last["seq"], last["tokens"]),
                               bool(known))
        if rows:
            try:
                await conn.executemany("INSERT INTO entries VALUES ($1, $2, $3, $4, $5, $6, $7)",
                                       rows)
            except asyncpg.UniqueViolationError as exc:
                raise StaleWrite(f"a result for that tool call is already recorded: "
                                 f"{exc}") from exc
    if cp.run is not None and await conn.fetchval(_UPDATE_RUN, *cp.run, cp.mine) is None:
        raise StaleWrite(f"run {cp.run[4]} is not at version {cp.run[5]}")
    if cp.steps:
        await conn.executemany(f"UPDATE runs SET transitions = {_appended('$1')} WHERE id = $2",
                               [(items, run_id) for run_id, items in cp.steps.items()])
    if cp.deliveries:
        await conn.executemany("INSERT INTO deliveries (key, run_id, remote_id, created_at, "
                               "data) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING",
                               cp.deliveries)


async def update_pending(conn: Any, key: str,
                         change: Callable[[Delivery], dict[str, Any]]) -> None:
    """Change a delivery not sent yet (``change`` says how), in the caller's transaction; a
    sent one is left alone."""
    data = await conn.fetchval("SELECT data FROM deliveries WHERE key = $1 FOR UPDATE", key)
    delivery = pending_changed(key, data, change)
    if delivery is not None:
        await conn.execute("UPDATE deliveries SET remote_id = $1, data = $2 WHERE key = $3",
                           delivery.remote_id, delivery.model_dump_json(), key)


# -- listings


def list_runs_sql(thread_id: str | None, states: Sequence[RunState] | None,
                  limit: int | None) -> tuple[str, list[Any]]:
    """``list_runs``'s query (newest first) and its parameters. Asking only for states of
    runs that have not ended reads the partial index ``runs_active``."""
    where: list[str] = []
    params: list[Any] = []
    if thread_id is not None:
        params.append(thread_id)
        where.append(f"thread_id = ${len(params)}")
    if states is not None:
        params.append([str(state) for state in states])
        where.append(f"state = ANY(${len(params)}::text[])")
        if states and TERMINAL.isdisjoint(states):
            where.append("active")
    sql = "SELECT data FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    params.append(limit)
    return sql + f" ORDER BY created_at DESC, n DESC LIMIT ${len(params)}", params


LIST_THREADS = """
SELECT t.id, (SELECT coalesce(max(e.seq) + 1, 0) FROM entries e WHERE e.thread_id = t.id),
       t.created_at,
       coalesce((SELECT max(r.created_at) FROM runs r WHERE r.thread_id = t.id),
                t.created_at) AS updated_at,
       (SELECT count(*) FROM runs r WHERE r.thread_id = t.id),
       (SELECT r.state FROM runs r WHERE r.thread_id = t.id
        ORDER BY r.created_at DESC, r.n DESC LIMIT 1)
FROM threads t ORDER BY updated_at DESC, t.id LIMIT $1 OFFSET $2
"""
"""Threads, most recently updated first: a thread's last activity is its newest run's
arrival (the last entry of ``runs_thread``), else its creation."""
