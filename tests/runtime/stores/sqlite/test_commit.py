"""The group commit (runtime/stores/sqlite/commit.py): writes that arrive together share a
transaction; one that finds the connection idle is done at once on the loop's thread; where
a durable write waits for the disk (``flush``: ``writer``, ``loop``, ``apart``, ``auto``);
the ``synchronous`` level each commit is made with."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runtime.errors import StaleWrite, StoreError, StoreGone
from runtime.stores.sqlite import walsync
from runtime.stores.sqlite.commit import FlushWay, GroupCommit
from runtime.stores.sqlite.thread import SQLiteThread
from tests.fakes.disk import HeldDisk
from tests.runtime.stores.sqlite.writes import insert, stale


class _Held:
    """Holds the writer's thread until released, so that writes pile up behind it."""

    def __init__(self) -> None:
        self.on_thread = asyncio.Event()
        self.gate = threading.Event()
        self._loop = asyncio.get_running_loop()

    def __call__(self, db: sqlite3.Connection) -> str:
        self._loop.call_soon_threadsafe(self.on_thread.set)
        self.gate.wait(10)
        return "held"




async def _writer(path: Path, *, inline: bool = False, flush: FlushWay = "writer"
                  ) -> tuple[GroupCommit, list[str]]:
    # As the store opens it: the group commit waits for another's lock, not SQLite.
    conn = await SQLiteThread.open(path, busy_timeout_s=0)
    wal = None
    if flush in ("apart", "auto"):
        await conn.call(lambda db: db.execute("PRAGMA journal_mode=WAL").fetchall())
        wal = Path(f"{path}-wal")
    writer = GroupCommit(conn, inline=inline, flush=flush, wal=wal)
    await writer.transaction(lambda db: db.execute("CREATE TABLE t (x INTEGER)"))
    statements: list[str] = []
    await writer.conn.call(sqlite3.Connection.set_trace_callback, statements.append)
    return writer, statements


async def test_writes_that_arrive_together_share_one_transaction(tmp_path: Path) -> None:
    writer, statements = await _writer(tmp_path / "g.db")
    try:
        held = _Held()
        first = asyncio.ensure_future(writer.write(held))
        await held.on_thread.wait()
        rest = [asyncio.ensure_future(writer.write(insert, i)) for i in range(3)]
        moved = asyncio.ensure_future(writer.write(stale))
        more = asyncio.ensure_future(writer.write(insert, 3))
        held.gate.set()
        assert await first == "held"
        assert await asyncio.gather(*rest, more) == [0, 1, 2, 3]
        with pytest.raises(StaleWrite):
            await moved
        rows = await writer.conn.call(lambda db: db.execute("SELECT x FROM t").fetchall())
        assert sorted(rows) == [(0,), (1,), (2,), (3,)]  # the stale write left nothing
        assert statements.count("BEGIN IMMEDIATE") == 2
        assert statements.count("COMMIT") == 2
    finally:
        await writer.close()


async def test_close_lets_writes_handed_in_land(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    writer, _ = await _writer(path)
    writes = [asyncio.ensure_future(writer.write(insert, i)) for i in range(10)]
    await asyncio.sleep(0)  # handed in
    await writer.close()
    assert await asyncio.gather(*writes) == list(range(10))
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM t").fetchone() == (10,)
    db.close()


async def test_an_interrupted_flusher_fails_the_pending_writes(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    writer, _ = await _writer(path)
    held = _Held()
    first = asyncio.ensure_future(writer.write(held))
    await held.on_thread.wait()
    pending = asyncio.ensure_future(writer.write(insert, 1))
    await asyncio.sleep(0)
    (flusher,) = [t for t in asyncio.all_tasks() if t.get_name() == "maiden-sqlite-commit"]
    flusher.cancel()
    for write in (first, pending):
        with pytest.raises(StoreError, match="the write was interrupted"):
            await write
    held.gate.set()
    assert await writer.write(insert, 2) == 2  # a later write goes in, alone
    await writer.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT x FROM t").fetchall() == [(2,)]
    db.close()


async def test_a_write_on_an_idle_connection_is_done_at_once_on_the_loop(tmp_path: Path) -> None:
    writer, statements = await _writer(tmp_path / "g.db", inline=True, flush="loop")
    try:
        loop_thread = threading.get_ident()

        def where(db: sqlite3.Connection) -> int:
            db.execute("INSERT INTO t VALUES (1)")
            return threading.get_ident()

        assert await writer.write(where) == loop_thread
        assert statements == ["BEGIN IMMEDIATE", "INSERT INTO t VALUES (1)", "COMMIT"]
    finally:
        await writer.close()


def _where(db: sqlite3.Connection) -> int:
    db.execute("INSERT INTO t VALUES (1)")
    return threading.get_ident()


async def test_a_durable_write_waits_for_its_flush_apart_and_the_loop_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``flush="apart"``: committed on the loop's thread without a flush, then the log is
    flushed on a thread of its own while the loop goes on; the writes committed meanwhile
    share the next flush."""
    disk = HeldDisk()
    monkeypatch.setattr(walsync, "_datasync", disk)
    writer, statements = await _writer(tmp_path / "g.db", inline=True, flush="apart")
    try:
        assert writer.flush == "apart"
        before = writer.counts.synced
        first = asyncio.ensure_future(writer.write(_where))
        await asyncio.wait_for(disk.flushing.wait(), 10)  # (on the flushing thread)
        assert not first.done()  # not told before it is on disk...
        assert statements[-3:] == ["BEGIN IMMEDIATE", "INSERT INTO t VALUES (1)", "COMMIT"]
        assert "PRAGMA synchronous=NORMAL" in statements  # ...nor flushed by SQLite
        # The loop is not held: more durable writes are committed on it meanwhile.
        committed = asyncio.Event()

        def counted(db: sqlite3.Connection) -> int:
            where = _where(db)
            if statements.count("INSERT INTO t VALUES (1)") == 4:
                committed.set()
            return where

        rest = [asyncio.ensure_future(writer.write(counted)) for _ in range(3)]
        await asyncio.wait_for(committed.wait(), 10)
        assert not any(r.done() for r in rest)
        disk.go.set()
        assert await first == threading.get_ident()
        assert await asyncio.gather(*rest) == [threading.get_ident()] * 3
        assert disk.flushes == 2  # one for the first, one shared by the three after it
        assert writer.counts.synced - before == 2 and writer.counts.here == 4
        assert await writer.write_lazily(_where) == threading.get_ident()
        assert disk.flushes == 2  # a lazy write waits for no flush
    finally:
        disk.go.set()
        await writer.close()


async def test_a_write_committed_returns_before_its_flush_and_the_next_durable_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``write_committed`` (an accepted message's write): committed on the loop's thread
    without a flush, and returned at once with its flush to await; a durable write made
    after it waits for a flush begun after its own commit, which covers both."""
    disk = HeldDisk()
    monkeypatch.setattr(walsync, "_datasync", disk)
    writer, statements = await _writer(tmp_path / "g.db", inline=True, flush="apart")
    try:
        here, on_disk = await writer.write_committed(_where)
        assert here == threading.get_ident() and on_disk is not None
        assert statements[-1] == "COMMIT" and disk.flushes == 0  # nothing flushed yet
        with sqlite3.connect(tmp_path / "g.db") as other:  # committed: another sees it
            assert other.execute("SELECT count(*) FROM t").fetchone() == (1,)
        flushed = asyncio.ensure_future(on_disk)
        await asyncio.wait_for(disk.flushing.wait(), 10)
        committed = asyncio.Event()

        def noted(db: sqlite3.Connection) -> int:
            committed.set()
            return _where(db)

        after = asyncio.ensure_future(writer.write(noted))
        await asyncio.wait_for(committed.wait(), 10)  # committed meanwhile, on the loop
        assert statements.count("INSERT INTO t VALUES (1)") == 2
        assert not flushed.done() and not after.done()
        disk.go.set()
        await asyncio.wait_for(flushed, 10)
        await asyncio.wait_for(after, 10)
        assert disk.flushes == 2  # the second begun after the write that came after
        # Where the flush is the commit's or the writer thread's: on disk already.
        writer.flush = "writer"
        _, none = await writer.write_committed(_where)
        assert none is None
    finally:
        disk.go.set()
        await writer.close()


class _Timed:
    """A disk whose flushes are quick (they do nothing) or take ``slow_s``; it notes the
    thread each is made on. Its quick is far below ``QUICK_S`` and its slow far above,
    whatever the machine's own disk or load."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[int] = []
        self.slow_s = 0.0
        monkeypatch.setattr(walsync, "_datasync", self)
        monkeypatch.setattr(walsync, "QUICK_S", 0.05)

    def __call__(self, fd: int) -> None:
        self.threads.append(threading.get_ident())
        if self.slow_s:
            time.sleep(self.slow_s)


def _level(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA synchronous").fetchone()[0])


async def test_a_quick_flush_is_made_on_the_loop_when_it_has_nothing_else_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``flush="auto"``, the store's default: the first flush goes to the flushing thread
    (the disk's speed is not known yet); once flushes are quick, a durable write made while
    the loop has nothing else ready is committed on the loop's thread with its flush
    within (SQLite's own: ``synchronous=FULL``), not flushed apart after."""
    disk = _Timed(monkeypatch)
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush="auto")
    try:
        loop_thread = threading.get_ident()
        before = writer.counts.synced
        assert await writer.write(_where) == loop_thread
        assert disk.threads == [disk.threads[0]] and disk.threads[0] != loop_thread
        assert writer.conn.here(_level) == 1  # NORMAL: flushed apart
        for _ in range(2):
            assert await writer.write(_where) == loop_thread
        assert len(disk.threads) == 1  # no flush apart: the commits' own
        assert writer.conn.here(_level) == 2  # FULL
        assert writer.counts.synced - before == 3 and writer.counts.flushed_here == 2
        assert writer.counts.flushed_here_max_s > 0
        # (Which of a write's and its flush's times is longer is the machine's to say: a
        # loaded one made this test fail comparing them; bench/ measures the times.)
    finally:
        await writer.close()


@asynccontextmanager
async def _warmed(path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> AsyncIterator[tuple[GroupCommit, _Timed]]:
    """A ``flush="auto"`` writer over a quick disk, its second flush made on the loop."""
    disk = _Timed(monkeypatch)
    writer, _ = await _writer(path, inline=True, flush="auto")
    try:
        for _ in range(2):
            await writer.write(_where)
        assert writer.counts.flushed_here == 1  # quick, and the loop was idle
        yield writer, disk
    finally:
        await writer.close()


async def test_with_other_work_ready_a_durable_write_goes_to_the_writers_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Others ready to run: the write is committed and flushed (by SQLite) on the writer's
    thread, where those that come meanwhile would share it; the loop goes on."""
    async with _warmed(tmp_path / "g.db", monkeypatch) as (writer, disk):
        flushes = len(disk.threads)
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)  # something else is ready to run
        assert await writer.write(_where) != threading.get_ident()
        assert ran.is_set()
        assert len(disk.threads) == flushes  # not the log's flush apart: SQLite's own
        assert writer.counts.sent_there == 1 and writer.counts.flushed_here == 1
        assert await writer.write_lazily(_where) == threading.get_ident()  # (no flush)


SPIKE_S = 1.0
"""A spike of the disk, or of a write's own work: far longer than a small flush takes even
on a loaded machine, so that which of the two a flush's time counts is plain (a bound that
tells them apart, not a measure of speed)."""


def _slow_commit(db: sqlite3.Connection) -> int:
    """A write whose ``COMMIT`` meets a spike of the disk (SQLite's flush within): ``SPIKE_S``
    slept in the progress handler SQLite calls while it runs the ``COMMIT``."""
    where = _where(db)
    slept: list[bool] = []

    def spike() -> int:
        if not slept:
            slept.append(True)
            time.sleep(SPIKE_S)
        return 0

    db.set_progress_handler(spike, 1)  # (the next statement is the COMMIT)
    return where


def _slow_python(db: sqlite3.Connection) -> int:
    time.sleep(SPIKE_S)  # a write whose own work is slow, its COMMIT quick
    return _where(db)


async def test_a_slow_flush_sends_the_next_ones_to_the_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _warmed(tmp_path / "g.db", monkeypatch) as (writer, disk):
        loop_thread = threading.get_ident()
        flushes = len(disk.threads)
        # A write slow before its COMMIT (its Python, a collection of garbage) holds the
        # loop, but says nothing of the disk: the flush is timed alone.
        assert await writer.write(_slow_python) == loop_thread
        assert writer.counts.flushed_here == 2 \
            and writer.counts.flushed_here_max_s < SPIKE_S
        assert writer.counts.here_max_s >= SPIKE_S
        assert await writer.write(_slow_commit) == loop_thread  # this one holds the loop...
        assert writer.counts.flushed_here == 3 and writer.counts.flushed_here_max_s >= SPIKE_S
        await writer.write(_where)  # ...the next is flushed apart
        assert len(disk.threads) == flushes + 1 and disk.threads[-1] != loop_thread
        # Quick again: back on the loop once the recent flushes are quick again.
        for _ in range(20):
            await writer.write(_where)
        assert writer.counts.flushed_here > 3
        flushes = len(disk.threads)
        await writer.write(_where)
        assert len(disk.threads) == flushes and writer.counts.flushed_here > 4


async def test_the_write_that_starts_the_log_again_is_made_on_the_writers_thread(
        tmp_path: Path) -> None:
    """After a checkpoint that copied the whole log, the next write starts the log again
    and SQLite flushes its header then, whatever ``synchronous`` says: that write goes to
    the writer's thread, and the ones after it are made on the loop's again."""
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush="apart")
    writer.checkpoint_every = 3
    try:
        loop_thread = threading.get_ident()
        for _ in range(3):
            assert await writer.write_lazily(_where) == loop_thread
        assert writer._checkpointer is not None
        await asyncio.wait([writer._checkpointer])  # (a task of its own, on the thread)
        assert await writer.write(_where) != loop_thread
        assert await writer.write(_where) == loop_thread
    finally:
        await writer.close()


async def test_closing_waits_for_the_flushes_of_what_was_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = HeldDisk()
    monkeypatch.setattr(walsync, "_datasync", disk)
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush="apart")
    write = asyncio.ensure_future(writer.write(_where))
    await asyncio.wait_for(disk.flushing.wait(), 10)
    closing = asyncio.ensure_future(writer.close())
    await asyncio.sleep(0)  # (let it begin: it must wait for the flush)
    assert not closing.done() and not write.done()
    disk.go.set()
    await asyncio.wait_for(closing, 10)
    assert await write == threading.get_ident() and disk.flushes == 1


async def test_without_a_write_ahead_log_durable_writes_go_to_the_thread(tmp_path: Path
                                                                        ) -> None:
    """``flush="apart"`` needs a WAL to flush: without one (a journal SQLite could not
    make a WAL), durable writes go to the connection's thread, never held on the loop."""
    conn = await SQLiteThread.open(tmp_path / "g.db", busy_timeout_s=0)
    writer = GroupCommit(conn, inline=True, flush="apart", wal=None)
    try:
        assert writer.flush == "writer"
    finally:
        await writer.close()


async def test_flushes_on_the_writers_thread_are_shared(tmp_path: Path) -> None:
    """``flush="writer"``: durable writes are made on the connection's thread, where those
    that come meanwhile share a flush; a lazy write, which does not flush, stays on the
    loop's."""
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush="writer")
    try:
        loop_thread = threading.get_ident()
        assert await writer.write(_where) != loop_thread
        assert await writer.write_lazily(_where) == loop_thread
        assert (writer.counts.here, writer.counts.sent_there) == (1, 1)
        before = writer.counts.synced
        await asyncio.gather(*(writer.write(insert, i) for i in range(20)))
        assert writer.counts.synced - before < 20
    finally:
        await writer.close()


async def test_flushes_on_the_loop_are_timed(tmp_path: Path) -> None:
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush="loop")
    try:
        before = writer.counts.synced
        assert await writer.write(_where) == threading.get_ident()
        assert writer.counts.here == 1 and writer.counts.synced - before == 1
        assert writer.counts.here_max_s > 0
    finally:
        await writer.close()


@pytest.mark.parametrize("fails", [False, True])
async def test_a_commit_flushed_within_is_told_only_after_the_flush_under_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    """A quick disk: a durable commit on the loop's thread flushes the log itself even while
    a flush apart is under way (the flushing thread may be done with the disk and only wait
    for the interpreter's lock), but its writer is told only once that flush is over, and
    fails with it: a later flush that succeeds says nothing of pages an earlier one lost."""
    disk = HeldDisk(hold=False)  # quick (0.05 s, however loaded), until held
    monkeypatch.setattr(walsync, "_datasync", disk)
    monkeypatch.setattr(walsync, "QUICK_S", 0.05)
    writer, statements = await _writer(tmp_path / "g.db", inline=True, flush="auto")
    try:
        await writer.write(_where)  # the first flush apart: the disk found quick
        writer.flush, disk.hold = "apart", True
        first = asyncio.ensure_future(writer.write(_where))
        await asyncio.wait_for(disk.flushing.wait(), 10)  # under way, held
        writer.flush = "auto"
        flushed_here = writer.counts.flushed_here
        committed = asyncio.Event()

        def noted(db: sqlite3.Connection) -> int:
            committed.set()
            return _where(db)

        second = asyncio.ensure_future(writer.write(noted))
        # (Not in a task of wait_for's, which would be ready beside it: the loop not idle.)
        await committed.wait()  # its commit is done when this wakes
        assert not second.done() and writer.counts.flushed_here == flushed_here + 1
        assert statements.count("INSERT INTO t VALUES (1)") == 3  # committed, FULL
        disk.fails = fails
        disk.go.set()
        if fails:
            for write in (first, second):
                with pytest.raises(StoreGone):
                    await asyncio.wait_for(write, 10)
        else:
            assert [await asyncio.wait_for(w, 10) for w in (first, second)] == \
                [threading.get_ident()] * 2
            # An accepted message's write, the disk quick: flushed within, on disk already.
            _, on_disk = await writer.write_committed(_where)
            assert on_disk is None
    finally:
        disk.go.set()
        with contextlib.suppress(StoreError):
            await writer.close()


@pytest.mark.parametrize("flush", ["writer", "auto"])
async def test_a_flush_sqlite_makes_that_fails_loses_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: FlushWay) -> None:
    """SQLite's own flush at a durable commit (``synchronous=FULL``: on the writer's thread,
    or on the loop's with ``auto`` and a quick disk), failing: SQLite says so with
    ``SQLITE_IOERR_FSYNC``, raised here as it would come out of the COMMIT; the store is
    told it is lost."""
    _Timed(monkeypatch)  # the flushes apart: quick
    writer, _ = await _writer(tmp_path / "g.db", inline=True, flush=flush)
    lost: list[str] = []
    writer.conn.lost = lost.append
    where: list[int] = []

    def failing_commit(db: sqlite3.Connection) -> None:
        where.append(threading.get_ident())
        error = sqlite3.OperationalError("disk I/O error")
        error.sqlite_errorcode = sqlite3.SQLITE_IOERR_FSYNC  # as SQLite's COMMIT sets it
        raise error

    try:
        if flush == "auto":
            await writer.write(_where)  # the disk found quick
        with pytest.raises(StoreGone, match="a flush to disk failed"):
            await writer.write(failing_commit)
        assert len(lost) == 1 and "restart maiden" in lost[0]
        assert (where == [threading.get_ident()]) == (flush == "auto")
    finally:
        await writer.close()


async def test_a_write_that_finds_the_database_locked_waits_on_the_thread(tmp_path: Path
                                                                       ) -> None:
    path = tmp_path / "g.db"
    writer, _ = await _writer(path, inline=True)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        loop_thread = threading.get_ident()

        def where(db: sqlite3.Connection) -> int:
            db.execute("INSERT INTO t VALUES (1)")
            return threading.get_ident()

        write = asyncio.ensure_future(writer.write(where))
        await asyncio.sleep(0)
        assert not write.done()  # the loop was not held up: the write waits on the thread
        other.execute("COMMIT")
        assert await asyncio.wait_for(write, 10) != loop_thread
    finally:
        other.close()
        await writer.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM t").fetchone() == (1,)
    db.close()


async def test_a_non_durable_write_commits_without_its_own_sync(tmp_path: Path) -> None:
    writer, statements = await _writer(tmp_path / "g.db")
    try:
        await writer.write_lazily(insert, 1)
        await writer.write(insert, 2)
    finally:
        await writer.close()
    first = statements.index("PRAGMA synchronous=NORMAL")
    assert statements[first:first + 5] == ["PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE",
                                           "INSERT INTO t VALUES (1)", "COMMIT",
                                           "PRAGMA synchronous=FULL"]
    assert statements.count("PRAGMA synchronous=NORMAL") == 1  # the durable one syncs


async def test_the_sync_level_changes_only_where_the_writes_change(tmp_path: Path) -> None:
    writer, statements = await _writer(tmp_path / "g.db")
    try:
        for x in (1, 2, 3):
            await writer.write_lazily(insert, x)
        await writer.write(insert, 4)
        await writer.write(insert, 5)
    finally:
        await writer.close()
    levels = [s for s in statements if s.startswith("PRAGMA synchronous")]
    assert levels == ["PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"]
    assert statements.index("PRAGMA synchronous=FULL") < statements.index(
        "INSERT INTO t VALUES (4)")
