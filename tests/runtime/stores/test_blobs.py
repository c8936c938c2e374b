"""The store contract, files' blobs: stored once by their sha256, durable and readable from
another store object, listed and deleted, and no name that is not a digest reaches the
storage, on every backend."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable

import pytest

from runtime.errors import NotFound
from tests.runtime.stores.contract import AnyStore


async def test_a_blob_is_stored_once_by_its_content(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    data = b"\x89PNG not really" * 1000
    digest = hashlib.sha256(data).hexdigest()
    first = await store.put_blob(data, "image/png", 10.0)
    assert (first.digest, first.size, first.media_type, first.created_at) == (
        digest, len(data), "image/png", 10.0)
    again = await store.put_blob(data, "application/octet-stream", 20.0)
    assert again == first  # the first put's record stands
    async with new_store() as other:  # another process, or a restart
        assert await other.get_blob(digest) == data
        assert await other.blob_info(digest) == first
        assert [b.digest for b in await other.blobs()] == [digest]


async def test_blobs_are_listed_oldest_first_and_deleted(store: AnyStore) -> None:
    made = [await store.put_blob(bytes([i]) * (i + 1), "text/plain", 100.0 + i)
            for i in range(3)]
    assert await store.blobs() == made
    assert await store.delete_blobs([made[0].digest, made[2].digest, "0" * 64]) == 2
    assert await store.blobs() == [made[1]]
    with pytest.raises(NotFound):
        await store.get_blob(made[0].digest)
    assert await store.blob_info(made[0].digest) is None
    assert await store.delete_blobs([]) == 0


async def test_concurrent_puts_of_the_same_bytes_keep_one_blob(store: AnyStore) -> None:
    data = b"shared" * 10_000
    infos = await asyncio.gather(*(store.put_blob(data, "text/plain", 5.0) for _ in range(5)))
    assert len({i.digest for i in infos}) == 1
    assert len(await store.blobs()) == 1


@pytest.mark.parametrize("name", ["../../etc/passwd", "A" * 64, "a" * 63, "", "a" * 64 + "/x",
                                  "a" * 64 + ".json"])
async def test_a_name_that_is_not_a_digest_is_not_found(store: AnyStore, name: str) -> None:
    with pytest.raises(NotFound):
        await store.get_blob(name)
    with pytest.raises(NotFound):
        await store.blob_info(name)
    with pytest.raises(NotFound):
        await store.delete_blobs([name])
