"""The files store's outbox: delivery records, in their threads' snapshots (written by
checkpoints), and their sending."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...errors import NotFound
from ...model.runs import Delivery, StreamState
from ..base import OutboxStore
from ..rows import UNCLAIMED, claim_change, stream_change, upload_change
from .core import FilesCore
from .names import thread_stem

__all__ = ["FilesOutbox"]


class FilesOutbox(FilesCore, OutboxStore):
    """The files store's ``OutboxStore``."""

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None,
        thread_id: str | None = None,
    ) -> list[Delivery]:
        return await self._disk.io(self._deliveries, run_id, pending, thread_id)

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        await self._update_pending(key, lambda _: {"remote_id": remote_id, "delivered_at": at})

    async def delivery_failed(self, key: str, error: str) -> None:
        await self._update_pending(key, lambda d: {"attempts_failed": d.attempts_failed + 1,
                                                   "last_error": error, **UNCLAIMED})

    async def claim_delivery(self, key: str, sender: str, at: float, ttl_s: float, *,
                             steal_from: str | None = None) -> Delivery:
        return await self._update_pending(key, claim_change(sender, at, ttl_s, steal_from))

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        await self._update_pending(key, stream_change(state, remote_ids, at))

    async def upload_started(self, key: str, upload_id: str) -> None:
        await self._update_pending(key, upload_change(key, upload_id))

    async def _update_pending(self, key: str,
                              change: Callable[[Delivery], dict[str, Any]]) -> Delivery:
        thread_id = await self._disk.io(self._delivery_thread, key)
        if thread_id is None:
            raise NotFound(f"no delivery {key!r}")
        async with self._thread_lock(thread_stem(thread_id)):
            return await self._disk.io(self._change_delivery, thread_id, key, change)

    # -- synchronous work, run in a worker thread

    def _deliveries(self, run_id: str | None, pending: bool | None,
                    thread_id: str | None) -> list[Delivery]:
        found = self._all_deliveries()
        if run_id is not None:
            found = [d for d in found if d.run_id == run_id]
        if thread_id is not None:
            found = [d for d in found if d.thread_id == thread_id]
        if pending is not None:
            found = [d for d in found if (d.remote_id is None) == pending]
        return found  # each thread's in the order written (not by a clock: rows.py says why)

    def _change_delivery(self, thread_id: str, key: str,
                         change: Callable[[Delivery], dict[str, Any]]) -> Delivery:
        with self._threads.lock(thread_id):
            snap = self._threads.load(thread_id)
            if snap is None:
                raise NotFound(f"no delivery {key!r}")
            delivery, changed = snap.update_pending(self._threads.path(thread_id), key, change)
            if changed:
                self._threads.save(snap)
            return delivery
