"""The files store's core, which every role of it is built on: one JSON snapshot per
thread, replaced atomically, and small files beside them.

Layout under ``root``::

    store.json                  {"format": 1, "kind": "maiden-files", "id": random id}
    create.lock                 flock'd by every create_run (idempotency keys, run ids)
    threads/{name}.json         a thread's snapshot: entries, runs, transitions, deliveries
    threads/{name}.lock         flock'd around every read-modify-write of that snapshot
    threads/{name}.erasing      an erased thread's snapshot until what it names is gone
    runs/{name}                 pointer: the thread that holds a run
    idempotency/{sha256(key)}   pointer: the run that holds an idempotency key
    deliveries/{sha256(key)}    pointer: the thread that holds a delivery record
    requests/, instances/,      the control plane (``control``), leases (``leases``),
    leases.json, schedules/,    schedule records (``schedules``), notes (``notes``)
    notes/, feedback/           and votes on replies (``feedback``)
    memories/{sha256(id)}.json  a memory and the calls that changed it (``memories``)
    blobs/{sha256}[.json]       files' bytes and their records (``blobs``)

Every file is written to a temp file in its folder, fsynced, renamed over the old
one, and the folder is fsynced: a reader sees the old version or the new one,
never a torn file, and needs no lock. Pointers are written before the snapshot
that makes them true, so a crash can leave a dangling pointer (ignored, later
overwritten) but never a run or a delivery that cannot be found.

POSIX only (``fcntl.flock``); fine on a local disk, not on NFS.

Its parts, each on the one ``Disk`` (``fs``: atomic writes, locks, the worker thread):
``Threads`` and ``Pointers`` (``folders``); ``names`` maps ids to file names and
``snapshot`` is the snapshot format.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import weakref
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from ...errors import CorruptStore, StoreError
from ...model.runs import Delivery
from ..base import Opens
from ..identity import FileIdentity, Unsure
from .folders import Pointers, Threads
from .fs import Disk, read_or_none, remove_stale_temp_files
from .names import key_file_name, run_file_name
from .snapshot import check_marker, marker

__all__ = ["FilesCore", "parse_file"]

M = TypeVar("M", bound=BaseModel)


class FilesCore(Opens):
    """The ``Disk`` and the folders on it, ``open`` and ``close``, and the locks.

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
        root = self.root.absolute()
        self._identity = FileIdentity(root, "the store folder", watched=root / "store.json",
                                      verify=self._verify)
        self._store_id: str | None = None
        """The store's identity, read (or written) at open."""
        self._disk.lost = self._identity.lose
        # In-process locks keep concurrent tasks from queueing up worker threads on a
        # flock; the flock is what makes writers of other processes wait.
        self._create_lock = asyncio.Lock()
        self._thread_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    async def open(self) -> None:
        await self._disk.open(self._open)
        self._identity.pin()

    async def close(self) -> None:
        self._disk.close()

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
        path = self.root / "store.json"
        with self._disk.lock(self.root / "create.lock"):  # one identity, whoever opens first
            data = read_or_none(path)
            store_id = None if data is None else check_marker(path, data)
            if store_id is None:  # a new store, or one made before identities
                store_id = secrets.token_hex(16)
                self._disk.write(path, marker(store_id))
        self._store_id = store_id
        remove_stale_temp_files([self.root, *folders])

    def _verify(self) -> str | None:
        """Why ``store.json`` no longer says this is the store opened, or None. Asked when
        that file was written since the open (two ``stat``s per accepted message: the
        folder's and its): nothing writes it after the open, so a write at all is a copy of
        a store put over this one, another or this one's (a backup put back)."""
        path = self._identity.watched
        assert path is not None
        try:
            found = check_marker(path, path.read_bytes())
        except FileNotFoundError:
            return f"{path.name} was deleted"
        except OSError as exc:
            raise Unsure from exc
        except StoreError as exc:
            return f"{path.name} is not this store's any more: {exc}"
        if found != self._store_id:
            return f"{path.name} names another store, identity {found}, not {self._store_id}"
        return (f"{path.name} was written again: a copy of this store was put over it "
                "(a backup put back?), without what was written since")

    def _delivery_thread(self, key: str) -> str | None:
        pointer = self._delivery_pointers.get(key)
        return None if pointer is None else pointer["thread_id"]

    def _all_deliveries(self) -> list[Delivery]:
        return [d for path, snap in self._threads.all() for d in snap.parsed_deliveries(path)]

    def _folder(self, name: str) -> Path:
        folder = self._disk.root / name
        folder.mkdir(exist_ok=True)
        return folder


def parse_file(path: Path, model: type[M]) -> M:
    try:
        return model.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise CorruptStore(f"{path}: {exc}") from exc
