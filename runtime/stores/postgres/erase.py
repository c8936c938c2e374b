"""The PostgreSQL store's erasure of a thread (``erasure``): one transaction, which first
locks the thread's row (a checkpoint of the thread, in any replica, waits for it, then finds
the thread gone) and deletes the thread's runs before anything else, so that a run another
replica took in meanwhile either is seen, and stops the erasure, or comes after it, in a
thread begun anew."""

from __future__ import annotations

import json
from typing import Any

from ...errors import StaleWrite
from ...model.runs import TERMINAL, RunState
from ..base import check_thread_id
from ..erasure import Erased, ThreadEraser, named_digests, stop_scope, thread_lease, thread_scope
from .core import PostgresCore
from .memories import erase_memories
from .sql import encode_text

__all__ = ["PostgresErasure"]


class PostgresErasure(PostgresCore, ThreadEraser):
    """The PostgreSQL store's ``ThreadEraser``."""

    async def delete_thread(self, thread_id: str) -> Erased:
        check_thread_id(thread_id)
        async with self._transaction() as conn:
            erased = await _erase(conn, thread_id)
        self._threads.pop(thread_id)  # other replicas' copies fail their check on reading
        return erased


async def _erase(conn: Any, thread_id: str) -> Erased:
    await conn.execute("SELECT 1 FROM threads WHERE id = $1 FOR UPDATE", thread_id)
    runs = await conn.fetch("DELETE FROM runs WHERE thread_id = $1 RETURNING id, state, data",
                            thread_id)
    going = [row["id"] for row in runs if RunState(row["state"]) not in TERMINAL]
    if going:  # nothing is written: the transaction is rolled back
        raise StaleWrite(f"thread {thread_id!r} has a run that has not ended ({going[0]}): "
                         "cancel it first")
    ids = [row["id"] for row in runs]
    wire = [encode_text(run_id) for run_id in ids]  # arrays do not go through the codec
    scopes = [encode_text(s) for s in (thread_scope(thread_id), *map(stop_scope, ids))]
    texts = [row["data"] for row in runs]
    texts += [row["data"] for row in await conn.fetch(
        "DELETE FROM entries WHERE thread_id = $1 RETURNING data", thread_id)]
    entries = len(texts) - len(runs)
    gone = await conn.fetch("DELETE FROM deliveries WHERE run_id = ANY($1) RETURNING data",
                            wire)
    texts += [row["data"] for row in gone]
    votes = _count(await conn.execute("DELETE FROM feedback WHERE run_id = ANY($1)", wire))
    notes = _count(await conn.execute("DELETE FROM notes WHERE scope = ANY($1)", scopes))
    await conn.execute("DELETE FROM note_calls WHERE scope = ANY($1)", scopes)
    memories = await erase_memories(conn, thread_id)
    await conn.execute("DELETE FROM threads WHERE id = $1", thread_id)
    # A live holder's lease is its own to give up (it lingers for a moment at most).
    await conn.execute("DELETE FROM leases WHERE name = $1 AND expires_at <= now()",
                       thread_lease(thread_id))
    await _forget_requests(conn, set(ids))
    blobs = 0
    for digest in sorted(named_digests(texts)):
        field = f'"digest":"{digest}"'
        named = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM entries WHERE strpos(data, $1) > 0) "
            "OR EXISTS (SELECT 1 FROM runs WHERE strpos(data, $1) > 0) "
            "OR EXISTS (SELECT 1 FROM deliveries WHERE strpos(data, $1) > 0)", field)
        if not named:
            blobs += _count(await conn.execute("DELETE FROM blobs WHERE digest = $1", digest))
    return Erased(thread_id, entries=entries, runs=len(runs), deliveries=len(gone),
                  votes=votes, notes=notes, blobs=blobs, memories=memories)


async def _forget_requests(conn: Any, run_ids: set[str]) -> None:
    """Remove the control requests about the runs. Read whole and matched here: a request's
    JSON may hold an escaped U+0000, which a ``jsonb`` cast would refuse."""
    if not run_ids:
        return
    rows = await conn.fetch("SELECT id, data FROM requests")
    about = [row["id"] for row in rows if json.loads(row["data"]).get("run_id") in run_ids]
    if about:
        await conn.execute("DELETE FROM requests WHERE id = ANY($1)", about)


def _count(status: str) -> int:
    """The rows a statement touched, from its status (``DELETE 3``)."""
    return int(status.rsplit(" ", 1)[-1])
