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
from json.encoder import encode_basestring as _text
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from ...errors import StaleWrite
from ...model.runs import TERMINAL, Delivery, RunState
from ..base import Checkpoint
from ..rows import activity, entry_row, pending_changed, pending_now, run_json, spend_of

__all__ = ["CHECKPOINT", "ERRORS", "LIST_THREADS", "TOLD_CHECKPOINT", "UNREACHABLE",
           "checkpoint_args", "configure", "decode_text", "encode_text", "keep", "list_runs_sql",
           "unreachable", "update_pending", "write_checkpoint"]

ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError,
          TimeoutError)
"""What asyncpg raises: the server's errors, a misused or lost connection, a connection whose
protocol is out of step (a server shutting down sends an idle connection its last error,
``terminating connection due to administrator command``, and a query made on it before it
is seen closed meets ``InternalClientError``: "another operation is in progress"), the
network, a connection that took too long to make."""

UNREACHABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError,
               asyncpg.AdminShutdownError, asyncpg.CrashShutdownError,
               asyncpg.TooManyConnectionsError)
"""Those of them that say the server was not reached, or not yet ready, or went away (a
refusal, a reset, a time-out, a server starting or shutting down, or full): worth trying
again, unlike a password refused or a database that does not exist."""


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server was not reached or went away (``UNREACHABLE``), or
    the connection a statement ran on was closed under it (asyncpg's ``InterfaceError``:
    "cannot call Transaction.__aexit__(): the underlying connection is closed", a cut in
    the middle of a start's migration: chaos, seed 8080)."""
    return isinstance(exc, UNREACHABLE) or (
        isinstance(exc, asyncpg.InterfaceError) and "connection is closed" in str(exc))


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


CHECKPOINT = "SELECT maiden_checkpoint(" + ", ".join(f"${i}" for i in range(1, 25)) + ")"
"""A checkpoint, in one round trip (the schema's ``maiden_checkpoint``, version 7)."""

TOLD_CHECKPOINT = CHECKPOINT + ", pg_notify($25, $26)"
"""A checkpoint and a notification, sent only if it commits, in the same round trip."""

STALE = "MDN01"
"""The SQLSTATE ``maiden_checkpoint`` raises for a stale write."""


def checkpoint_args(cp: Checkpoint) -> tuple[Any, ...]:
    """``CHECKPOINT``'s parameters: the thread and position, the entries as arrays (each
    entry's own tokens: the function sums them), the run, every run's transitions as JSON
    arrays' items joined, the deliveries as arrays. Array elements are encoded here (the
    codec does not reach into arrays)."""
    steps: dict[str, list[str]] = {}
    for t in cp.transitions:
        steps.setdefault(t.run_id, []).append(
            f"[{_text(t.source)},{_text(t.target)},{_text(t.reason)},{t.at!r}]")
    joined = {run_id: ",".join(items) for run_id, items in steps.items()}
    rows = [entry_row(cp.thread_id, (cp.position or 0) + i, entry)
            for i, entry in enumerate(cp.entries)]
    run: tuple[Any, ...] = (None,) * 9
    if cp.run is not None:
        run = (cp.run.id, cp.run.version - 1, cp.run.state, cp.run.version, run_json(cp.run),
               activity(cp), *spend_of(cp.run), joined.pop(cp.run.id, None))
    deliveries = [(d.key, d.run_id, d.remote_id, d.created_at, d.model_dump_json())
                  for d in cp.deliveries]
    return (
        cp.thread_id, cp.position,
        [encode_text(r[2]) for r in rows], [r[3] for r in rows],
        [None if r[4] is None else encode_text(r[4]) for r in rows],
        [encode_text(r[5]) for r in rows], [r[6] for r in rows],
        *run,
        [encode_text(k) for k in joined] or None, list(joined.values()) or None,
        [encode_text(d[0]) for d in deliveries] or None,
        [encode_text(d[1]) for d in deliveries] or None,
        [None if d[2] is None else encode_text(d[2]) for d in deliveries] or None,
        [d[3] for d in deliveries] or None,
        [encode_text(d[4]) for d in deliveries] or None,
        not cp.durable,
    )


async def write_checkpoint(conn: Any, cp: Checkpoint,
                           told: tuple[str, str] | None = None) -> None:
    """The checkpoint, in one call (its own transaction): all of it, or ``StaleWrite`` (or
    another error) and nothing. ``told``: a notification (channel, payload) sent with it."""
    try:
        if told is None:
            await conn.execute(CHECKPOINT, *checkpoint_args(cp))
        else:
            await conn.execute(TOLD_CHECKPOINT, *checkpoint_args(cp), *told)
    except asyncpg.UniqueViolationError as exc:
        raise StaleWrite(f"a result for that tool call is already recorded: {exc}") from exc
    except asyncpg.PostgresError as exc:
        if getattr(exc, "sqlstate", None) == STALE:
            raise StaleWrite(str(getattr(exc, "message", exc))) from exc
        raise


async def update_pending(conn: Any, key: str,
                         change: Callable[[Delivery], dict[str, Any]]) -> Delivery:
    """Change a delivery not sent yet (``change`` says how), in the caller's transaction; a
    sent one is left alone. The delivery as it stands after."""
    data = await conn.fetchval("SELECT data FROM deliveries WHERE key = $1 FOR UPDATE", key)
    delivery = pending_changed(key, data, change)
    if delivery is not None:
        await conn.execute("UPDATE deliveries SET remote_id = $1, data = $2 WHERE key = $3",
                           delivery.remote_id, delivery.model_dump_json(), key)
    return pending_now(key, data, delivery)


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
