"""The files store: one JSON snapshot per thread, replaced atomically.

Layout under ``root``::

    store.json                  {"format": 1, "kind": "maiden-files"}
    create.lock                 flock'd by every create_run (idempotency keys, run ids)
    threads/{name}.json         a thread's snapshot: entries, runs, transitions, deliveries
    threads/{name}.lock         flock'd around every read-modify-write of that snapshot
    runs/{name}                 pointer: the thread that holds a run
    idempotency/{sha256(key)}   pointer: the run that holds an idempotency key
    deliveries/{sha256(key)}    pointer: the thread that holds a delivery record
    requests/, instances/,      the control plane, schedule records and notes
    schedules/, notes/          (``control``)

Every file is written to a temp file in its folder, fsynced, renamed over the old
one, and the folder is fsynced: a reader sees the old version or the new one,
never a torn file, and needs no lock. Pointers are written before the snapshot
that makes them true, so a crash can leave a dangling pointer (ignored, later
overwritten) but never a run or a delivery that cannot be found.

Unlike SQLite, a checkpoint rewrites the whole snapshot: its cost grows with the
thread's length. POSIX only (``fcntl.flock``); fine on a local disk, not on NFS.

Its parts, each on the one ``Disk`` (``fs``: atomic writes, locks, the worker thread):
``Threads`` and ``Pointers`` (``folders``), and the control plane, leases, schedule
records and notes (``FilesControl`` in ``control``, which ``FilesStore`` is made of, as
the SQLite and PostgreSQL stores are of theirs); ``names`` maps ids to file names and
``snapshot`` is the snapshot format.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...entries import Entry
from ...errors import NotFound, StaleWrite, StoreError
from ...runs import Delivery, Run, RunState, Transition, arriving_after
from ...tail import Tail, tail_of
from ..base import Checkpoint, Opens, StoreStats, ThreadInfo, check_thread_id
from ..identity import FileIdentity
from .control import FilesControl
from .folders import Pointers, Threads
from .fs import Disk, read_or_none, remove_stale_temp_files
from .names import key_file_name, run_file_name, thread_file_name, thread_stem
from .snapshot import MARKER, Snapshot, check_marker, select_runs

__all__ = ["FilesStore"]


class FilesStore(FilesControl, Opens):
    """Files-backed ``Store``; use as ``async with FilesStore(root) as store``.

    ``fsync=False`` trades durability against power loss for speed (a killed process
    still never leaves a torn file). ``lock_timeout_s`` bounds the wait for another
    process's write, like SQLite's busy timeout.
    """

    def __init__(
        self, root: str | Path, *, fsync: bool = True, lock_timeout_s: float = 10.0
    ) -> None:
        self.root = Path(root)
        self._disk = Disk(self.root, fsync=fsync, lock_timeout_s=lock_timeout_s)
        self._threads = Threads(self._disk)
        self._run_pointers = Pointers(self._disk, "runs", "run_id", run_file_name)
        self._key_pointers = Pointers(self._disk, "idempotency", "key", key_file_name)
        self._delivery_pointers = Pointers(self._disk, "deliveries", "key", key_file_name)
        self._last_stamp = 0
        self._identity = FileIdentity(self.root.absolute(), "the store folder")
        # In-process locks keep concurrent tasks from queueing up worker threads on a
        # flock; the flock is what makes writers of other processes wait.
        self._create_lock = asyncio.Lock()
        self._thread_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    async def open(self) -> None:
        await self._disk.open(self._open)
        self._identity.pin()

    def gone(self) -> str | None:
        return self._identity.gone() if self._disk.is_open else None

    async def close(self) -> None:
        self._disk.close()

    # -- runs and threads

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        self._identity.check()  # one stat per accepted message: never into a lost folder
        async with self._create_lock:
            return await self._disk.io(self._create_run, run)

    async def commit(self, checkpoint: Checkpoint) -> None:
        self._identity.check_lost()
        async with self._thread_lock(thread_file_name(checkpoint.thread_id)):
            await self._disk.io(self._commit, checkpoint)

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        check_thread_id(thread_id)
        entries = await self._disk.io(self._load_entries, thread_id)
        return entries[offset:] if limit is None else entries[offset:offset + limit]

    async def load_tail(self, thread_id: str, tokens: int, *, start: int | None = None
                        ) -> Tail:
        # A snapshot is read whole anyway: the tail is cut from it.
        return tail_of(await self.load_entries(thread_id), tokens, start)

    async def thread_length(self, thread_id: str) -> int:
        check_thread_id(thread_id)
        return await self._disk.io(self._length, thread_id)

    async def get_run(self, run_id: str) -> Run:
        found = await self._disk.io(self._find_run, run_id)
        if found is None:
            raise NotFound(f"no run {run_id!r}")
        return found[1]

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        return await self._disk.io(self._run_for_key, idempotency_key)

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if thread_id is not None:
            check_thread_id(thread_id)
        return await self._disk.io(self._list_runs, thread_id, states, limit)

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        threads = await self._disk.io(self._list_threads)
        return threads[offset:] if limit is None else threads[offset:offset + limit]

    async def stats(self) -> StoreStats:
        runs = await self.list_runs()
        deliveries = await self.deliveries()
        pending = sum(1 for d in deliveries if d.remote_id is None)
        return StoreStats(runs=dict(Counter(r.state for r in runs)),
                          threads=len(await self._disk.io(self._list_threads)),
                          deliveries_pending=pending, deliveries_sent=len(deliveries) - pending)

    async def transitions(self, run_id: str) -> list[Transition]:
        return await self._disk.io(self._transitions, run_id)

    # -- the outbox

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None
    ) -> list[Delivery]:
        return await self._disk.io(self._deliveries, run_id, pending)

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        await self._update_pending(key, lambda _: {"remote_id": remote_id, "delivered_at": at})

    async def delivery_failed(self, key: str, error: str) -> None:
        await self._update_pending(key, lambda d: {"attempts_failed": d.attempts_failed + 1,
                                                   "last_error": error})

    async def _update_pending(self, key: str,
                              change: Callable[[Delivery], dict[str, Any]]) -> None:
        thread_id = await self._disk.io(self._delivery_thread, key)
        if thread_id is None:
            raise NotFound(f"no delivery {key!r}")
        async with self._thread_lock(thread_stem(thread_id)):
            await self._disk.io(self._change_delivery, thread_id, key, change)

    # -- plumbing

    def _thread_lock(self, name: str) -> asyncio.Lock:
        lock = self._thread_locks.get(name)
        if lock is None:
            lock = self._thread_locks[name] = asyncio.Lock()
        return lock

    def _stamp(self) -> int:
        """Insertion order of runs across threads and processes (SQLite's rowid)."""
        self._last_stamp = max(time.time_ns(), self._last_stamp + 1)
        return self._last_stamp

    # -- synchronous work, run in a worker thread

    def _open(self) -> None:
        folders = [self._threads.folder, self._run_pointers.folder, self._key_pointers.folder,
                   self._delivery_pointers.folder]
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        marker = self.root / "store.json"
        data = read_or_none(marker)
        if data is None:
            self._disk.write(marker, MARKER)
        else:
            check_marker(marker, data)
        remove_stale_temp_files([self.root, *folders])

    def _find_run(self, run_id: str) -> tuple[Snapshot, Run] | None:
        pointer = self._run_pointers.get(run_id)
        if pointer is None:
            return None
        snap = self._threads.load(pointer["thread_id"])
        run = None if snap is None else snap.run(self._threads.path(snap.thread_id), run_id)
        return None if snap is None or run is None else (snap, run)

    def _run_for_key(self, key: str) -> Run | None:
        pointer = self._key_pointers.get(key)
        found = None if pointer is None else self._find_run(pointer["run_id"])
        return None if found is None else found[1]  # a pointer a crash left without its run

    def _create_run(self, run: Run) -> Run:
        with self._disk.lock(self.root / "create.lock"):
            key = run.idempotency_key
            holder = None if key is None else self._run_for_key(key)
            if holder is not None:
                return holder
            if self._find_run(run.id) is not None:
                raise StoreError(f"run {run.id!r} already exists")
            if key is not None:
                self._key_pointers.put(key=key, run_id=run.id)
            self._run_pointers.put(run_id=run.id, thread_id=run.thread_id)
            with self._threads.lock(run.thread_id):
                snap = self._threads.load(run.thread_id) or Snapshot(
                    run.thread_id, created_at=run.created_at, updated_at=run.created_at)
                if run.id in snap.runs:
                    raise StoreError(f"run {run.id!r} already exists")
                # After every run of the thread, in time and in insertion order, whatever
                # the clock of the process that took it.
                at = [r["run"].get("created_at") for r in snap.runs.values()
                      if isinstance(r.get("run"), dict)]
                run = arriving_after(run, max((float(a) for a in at
                                               if isinstance(a, int | float)), default=None))
                inserted = max([self._stamp(), *(r["inserted"] + 1 for r in snap.runs.values()
                                                 if isinstance(r.get("inserted"), int))])
                snap.updated_at = max(snap.updated_at, run.created_at)
                snap.runs[run.id] = {"inserted": inserted, "run": run.model_dump(mode="json")}
                self._threads.save(snap)
        return run

    def _commit(self, cp: Checkpoint) -> None:
        if cp.position is None and cp.entries:
            raise StoreError("a checkpoint with entries needs a position")
        if cp.run is not None and cp.run.thread_id != cp.thread_id:
            raise StoreError(f"run {cp.run.id} belongs to thread {cp.run.thread_id!r}, "
                             f"not {cp.thread_id!r}")
        if cp.position is None and cp.run is None and not cp.transitions and not cp.deliveries:
            return
        path = self._threads.path(cp.thread_id)
        with self._threads.lock(cp.thread_id):
            snap = self._threads.load(cp.thread_id)
            # Every check comes before the first write: a StaleWrite writes nothing.
            if cp.position is not None and (snap is None or len(snap.entries) != cp.position):
                raise StaleWrite(f"thread {cp.thread_id!r} moved past position {cp.position}")
            if cp.run is not None:
                current = None if snap is None else snap.run(path, cp.run.id)
                if current is None or current.version != cp.run.version - 1:
                    raise StaleWrite(f"run {cp.run.id} is not at version {cp.run.version - 1}")
            if snap is None:
                raise NotFound(f"no thread {cp.thread_id!r}")
            entries = snap.new_entries(cp.entries)
            deliveries = self._new_deliveries(snap, cp.deliveries)

            for delivery in deliveries:
                self._delivery_pointers.put(key=delivery.key, thread_id=cp.thread_id)
            snap.entries.extend(entries)
            if cp.run is not None:
                snap.runs[cp.run.id] = {"inserted": snap.runs[cp.run.id].get("inserted"),
                                        "run": cp.run.model_dump(mode="json")}
            snap.transitions.extend(t.model_dump(mode="json") for t in cp.transitions)
            snap.deliveries.extend(d.model_dump(mode="json") for d in deliveries)
            self._threads.save(snap)

    def _new_deliveries(self, snap: Snapshot, deliveries: Sequence[Delivery]) -> list[Delivery]:
        """The deliveries whose key is not taken yet, here or in another thread."""
        taken = {d.get("key") for d in snap.deliveries}
        new = []
        for delivery in deliveries:
            if delivery.key in taken:
                continue
            taken.add(delivery.key)
            elsewhere = self._delivery_thread(delivery.key)
            if elsewhere is not None and elsewhere != snap.thread_id:
                other = self._threads.load(elsewhere)
                if other is not None and any(d.get("key") == delivery.key
                                             for d in other.deliveries):
                    continue
            new.append(delivery)
        return new

    def _length(self, thread_id: str) -> int:
        snap = self._threads.load(thread_id)
        return 0 if snap is None else len(snap.entries)

    def _load_entries(self, thread_id: str) -> list[Entry]:
        snap = self._threads.load(thread_id)
        return [] if snap is None else snap.parsed_entries(self._threads.path(thread_id))

    def _list_runs(
        self, thread_id: str | None, states: Sequence[RunState] | None, limit: int | None
    ) -> list[Run]:
        if thread_id is not None:
            snap = self._threads.load(thread_id)
            snaps = [] if snap is None else [(self._threads.path(thread_id), snap)]
        else:
            snaps = list(self._threads.all())
        return select_runs([pair for path, snap in snaps for pair in snap.ordered_runs(path)],
                           states, limit)

    def _list_threads(self) -> list[ThreadInfo]:
        infos = [snap.info(path) for path, snap in self._threads.all()]
        infos.sort(key=lambda info: (-info.updated_at, info.id))
        return infos

    def _transitions(self, run_id: str) -> list[Transition]:
        found = self._find_run(run_id)
        if found is None:
            return []
        snap, _ = found
        return snap.run_transitions(self._threads.path(snap.thread_id), run_id)

    def _deliveries(self, run_id: str | None, pending: bool | None) -> list[Delivery]:
        found = [d for path, snap in self._threads.all() for d in snap.parsed_deliveries(path)]
        if run_id is not None:
            found = [d for d in found if d.run_id == run_id]
        if pending is not None:
            found = [d for d in found if (d.remote_id is None) == pending]
        found.sort(key=lambda d: d.created_at)
        return found

    def _delivery_thread(self, key: str) -> str | None:
        pointer = self._delivery_pointers.get(key)
        return None if pointer is None else pointer["thread_id"]

    def _change_delivery(self, thread_id: str, key: str,
                         change: Callable[[Delivery], dict[str, Any]]) -> None:
        with self._threads.lock(thread_id):
            snap = self._threads.load(thread_id)
            if snap is None:
                raise NotFound(f"no delivery {key!r}")
            if snap.update_pending(self._threads.path(thread_id), key, change):
                self._threads.save(snap)
