"""The pass's store read once its soak is over, with the runtime's own store class (not
through a replica): whether the outbox sent everything, the blobs it holds, the answers it
held back long, the leases left."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from runtime import ReplyDelivery, Store, StoreConfig, make_store
from runtime.outbox.ordering import ORDER_HOLD_S

from .files_checks import blob_digests
from .system import LEASE_LINGER_S, LEASE_TTL_S, StoreSpec

__all__ = ["open_store", "outbox_sent", "read_blobs", "read_held_long", "read_leases"]


def open_store(spec: StoreSpec, work: Path, dsn: str) -> Store:
    """The pass's store, as the runtime's own store class reads it (not opened yet)."""
    config = StoreConfig.model_validate({
        "kind": spec.kind, "path": spec.path or "unused.db", "dsn_env": "CHAOS_PG_DSN",
        **({"schema": spec.schema} if spec.schema else {})})
    return make_store(config, work, env={"CHAOS_PG_DSN": dsn})


async def outbox_sent(spec: StoreSpec, work: Path, dsn: str, timeout_s: float) -> bool:
    """Wait (at most ``timeout_s``) until the outbox holds nothing unsent: a reply held back
    behind an older one of its thread that another replica sent goes out with its own
    replica's next sweep (every 5 s), after the runs are over."""
    store = open_store(spec, work, dsn)
    await store.open()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while await store.deliveries(pending=True):  # noqa: ASYNC110 (others' outbox)
                    await asyncio.sleep(0.5)
                return True
    finally:
        await store.close()
    return False


async def read_blobs(spec: StoreSpec, work: Path, dsn: str) -> list[str]:
    """The digest of every blob the store holds, read with the runtime's own store."""
    store = open_store(spec, work, dsn)
    await store.open()
    try:
        return blob_digests(await store.blobs())
    finally:
        await store.close()


async def read_held_long(spec: StoreSpec, work: Path, dsn: str) -> set[str]:
    """The runs whose answer stayed in the outbox longer than the outbox keeps a thread's
    later messages waiting behind one (``ORDER_HOLD_S``; a margin for the clocks skewed):
    later answers may have been posted before it, by design."""
    store = open_store(spec, work, dsn)
    await store.open()
    try:
        now = time.time()
        return {d.run_id for d in await store.deliveries()
                if isinstance(d, ReplyDelivery) and d.answer
                and (d.delivered_at or now) - d.created_at > ORDER_HOLD_S - 10}
    finally:
        await store.close()


async def read_leases(spec: StoreSpec, work: Path, last_death: float, dsn: str
                      ) -> list[dict[str, Any]]:
    """The leases the store holds now, read with the runtime's own store, once a lease of
    the last replica stopped or killed would have expired (``lease_ttl_s``) and one kept
    after its thread's last run (``lease_linger_s``) would have been given up."""
    await asyncio.sleep(max(LEASE_LINGER_S + 1.5,
                            last_death + LEASE_TTL_S + 1 - time.monotonic()))
    store = open_store(spec, work, dsn)
    await store.open()
    try:
        return [lease.model_dump() for lease in await store.leases()]
    finally:
        await store.close()
