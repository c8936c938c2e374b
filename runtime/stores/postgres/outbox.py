"""The PostgreSQL store's outbox: delivery records (written by checkpoints) and their
sending."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.runs import DELIVERY, Delivery, StreamState
from ..base import OutboxStore
from ..rows import UNCLAIMED, claim_change, deliveries_query, stream_change, upload_change
from .core import PostgresCore
from .sql import update_pending

__all__ = ["PostgresOutbox"]


class PostgresOutbox(PostgresCore, OutboxStore):
    """The PostgreSQL store's ``OutboxStore``."""

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None,
        thread_id: str | None = None,
    ) -> list[Delivery]:
        sql, params = deliveries_query(run_id, pending, thread_id, param="$", order="n",
                                       thread="(data::json ->> 'thread_id')")
        return await self._parsed(DELIVERY.validate_json, sql, *params)

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key,
                                 lambda _: {"remote_id": remote_id, "delivered_at": at})

    async def delivery_failed(self, key: str, error: str) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key,
                                 lambda d: {"attempts_failed": d.attempts_failed + 1,
                                            "last_error": error, **UNCLAIMED})

    async def claim_delivery(self, key: str, sender: str, at: float, ttl_s: float, *,
                             steal_from: str | None = None) -> Delivery:
        # Seen by the other processes once committed; not waited for on disk for its own
        # sake: a claim lost with the server leaves a record any process sends, reconciling.
        async with self._transaction(durable=False) as conn:
            return await update_pending(conn, key, claim_change(sender, at, ttl_s, steal_from))

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key, stream_change(state, remote_ids, at))

    async def upload_started(self, key: str, upload_id: str) -> None:
        async with self._transaction() as conn:
            await update_pending(conn, key, upload_change(key, upload_id))
