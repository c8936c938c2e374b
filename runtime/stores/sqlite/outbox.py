"""The SQLite store's outbox: delivery records (written by checkpoints) and their sending."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.runs import DELIVERY, Delivery, StreamState
from ..base import OutboxStore
from ..rows import UNCLAIMED, claim_change, deliveries_query, stream_change, upload_change
from .core import SQLiteCore
from .sql import update_pending_row

__all__ = ["SQLiteOutbox"]


class SQLiteOutbox(SQLiteCore, OutboxStore):
    """The SQLite store's ``OutboxStore``."""

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None,
        thread_id: str | None = None,
    ) -> list[Delivery]:
        sql, params = deliveries_query(run_id, pending, thread_id, param="?", order="rowid",
                                       thread="json_extract(data, '$.thread_id')")
        rows = await self._fetchall(sql, params)
        return [DELIVERY.validate_json(row[0]) for row in rows]

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        await self._write(update_pending_row, key,
                          lambda _: {"remote_id": remote_id, "delivered_at": at})

    async def delivery_failed(self, key: str, error: str) -> None:
        await self._write(update_pending_row, key,
                          lambda d: {"attempts_failed": d.attempts_failed + 1,
                                     "last_error": error, **UNCLAIMED})

    async def claim_delivery(self, key: str, sender: str, at: float, ttl_s: float, *,
                             steal_from: str | None = None) -> Delivery:
        # Seen by the other processes once committed; not flushed for its own sake: a claim
        # lost with the machine's power leaves a record any process sends, reconciling.
        return await self._write_side().write_lazily(
            update_pending_row, key, claim_change(sender, at, ttl_s, steal_from))

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        await self._write(update_pending_row, key, stream_change(state, remote_ids, at))

    async def upload_started(self, key: str, upload_id: str) -> None:
        await self._write(update_pending_row, key, upload_change(key, upload_id))
