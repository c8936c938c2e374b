"""The flushes of the write-ahead log apart from its commits (runtime/stores/sqlite/walsync.py):
a commit's writer is told once a flush begun after it is over, commits made meanwhile share
one, and a flush that fails loses the store for good."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import StoreError, StoreGone
from runtime.model.runs import Run
from runtime.stores.sqlite import SQLiteStore, walsync
from runtime.stores.sqlite.commit import FlushWay
from runtime.stores.sqlite.walsync import QUICK_S, WalSync
from tests.fakes.disk import HeldDisk


@pytest.fixture
async def held(monkeypatch: pytest.MonkeyPatch) -> HeldDisk:
    """The OS's flush, held until the test lets it go (``tests/fakes/disk.py``)."""
    disk = HeldDisk()
    monkeypatch.setattr(walsync, "_datasync", disk)
    return disk


@pytest.fixture
async def wal(tmp_path: Path) -> AsyncIterator[tuple[WalSync, list[float], list[str]]]:
    """A log's flushes, with the times of those made and why it was lost, if it was."""
    path = tmp_path / "m.db-wal"
    path.write_bytes(b"frames")
    flushed: list[float] = []
    failed: list[str] = []
    sync = WalSync(path, flushed.append, failed.append)
    try:
        yield sync, flushed, failed
    finally:
        sync.close()


async def test_commits_made_during_a_flush_wait_for_the_next_one_and_share_it(
        held: HeldDisk, wal: tuple[WalSync, list[float], list[str]]) -> None:
    sync, flushed, _ = wal
    first = asyncio.ensure_future(sync.durable())
    async with asyncio.timeout(10):
        await held.flushing.wait()
    # Committed while the first flush is under way: that flush does not cover them.
    later = [asyncio.ensure_future(sync.after()) for _ in range(3)]
    held.go.set()
    async with asyncio.timeout(10):
        await first
        await asyncio.gather(*later)
    assert held.flushes == 2 and len(flushed) == 2  # one for the first, one for the three
    await sync.durable()  # nothing to flush but itself: one more
    assert held.flushes == 3


async def test_a_failed_flush_fails_its_writers_and_every_durable_write_after(
        held: HeldDisk, wal: tuple[WalSync, list[float], list[str]]) -> None:
    sync, flushed, failed = wal
    writers = [asyncio.ensure_future(sync.durable()) for _ in range(2)]
    async with asyncio.timeout(10):
        await held.flushing.wait()
    held.fails = True
    held.go.set()
    for writer in writers:
        with pytest.raises(StoreGone, match="a flush of the write-ahead log to disk failed"):
            await asyncio.wait_for(writer, 10)
    assert len(failed) == 1 and "restart maiden" in failed[0] and flushed == []
    held.fails = False  # the disk answers again: refused all the same, and not flushed
    with pytest.raises(StoreGone):
        sync.after().close()
    assert held.flushes == 1 and not sync.quick()
    await asyncio.wait_for(sync.settled(), 10)  # closing is not held up by the failure


def test_the_disk_is_quick_only_while_its_recent_flushes_were(tmp_path: Path) -> None:
    sync = WalSync(tmp_path / "m.db-wal")
    try:
        assert not sync.quick()  # its speed is not known yet
        sync.flushed_within(QUICK_S / 10)
        assert sync.quick()
        sync.flushed_within(QUICK_S * 10)  # one slow flush is enough to say it is not
        assert not sync.quick()
        for _ in range(20):
            sync.flushed_within(QUICK_S / 10)
        assert sync.quick()  # quick again
    finally:
        sync.close()


async def test_settled_waits_until_every_commit_made_is_on_disk(
        held: HeldDisk, wal: tuple[WalSync, list[float], list[str]]) -> None:
    sync, flushed, _ = wal
    for _ in range(3):
        sync.after().close()  # committed; its writer went away without waiting
    settled = asyncio.ensure_future(sync.settled())
    async with asyncio.timeout(10):
        await held.flushing.wait()
        assert not settled.done()
        held.go.set()
        await settled
    assert held.flushes == 1 and len(flushed) == 1
    await sync.settled()  # nothing left: no flush
    assert held.flushes == 1


async def test_a_closed_log_takes_no_more_durable_writes(tmp_path: Path) -> None:
    sync = WalSync(tmp_path / "m.db-wal")
    sync.close()
    with pytest.raises(StoreError, match="the store is closed"):
        await sync.durable()


class _FailingDisk:
    """The OS's flush of the log, as scripted: ``ok`` (instant) or ``fail`` (EIO, the disk
    could not write), then each one real."""

    def __init__(self, *script: str) -> None:
        self.script = list(script)
        self.real = walsync._datasync
        self.flushes = 0

    def __call__(self, fd: int) -> None:
        self.flushes += 1
        step = self.script.pop(0) if self.script else "real"
        if step == "fail":
            raise OSError(errno.EIO, "Input/output error")
        if step == "real":
            self.real(fd)


@pytest.mark.parametrize(("flush", "script"), [
    ("apart", ["fail"]),       # on the flushing thread
    ("auto", ["fail"]),        # the first one: the disk's speed is not known yet
])
async def test_a_failed_flush_of_the_log_loses_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: FlushWay, script: list[str]
) -> None:
    """A flush is not tried again after it failed: the OS may have dropped what it could
    not write, and a later flush that succeeds would not say so. The store is lost, as for
    a deleted file: that write and every durable one after fail, and ``gone`` says why."""
    disk = _FailingDisk(*script)
    monkeypatch.setattr(walsync, "_datasync", disk)
    monkeypatch.setattr(walsync, "QUICK_S", 0.05)  # an instant flush is quick, however loaded
    async with SQLiteStore(tmp_path / "m.db", flush=flush) as store:
        # The open copied the log into the file (its identity is read there): the first
        # write starts the log again, on the writer's thread, flushed by SQLite itself.
        await store.create_run(Run(id="1".ljust(32, "0"), thread_id="t", text="first"))
        assert disk.flushes == 0
        with pytest.raises(StoreGone, match="a flush of the write-ahead log to disk failed"):
            await store.create_run(Run(id="2".ljust(32, "0"), thread_id="t", text="lost"))
        flushes = disk.flushes
        assert "restart maiden" in (store.gone() or "")
        with pytest.raises(StoreGone):  # the disk works again: refused all the same
            await store.create_run(Run(id="3".ljust(32, "0"), thread_id="t", text="after"))
        assert disk.flushes == flushes  # and not flushed again
