"""The files store: one JSON snapshot per thread, replaced atomically.

Layout under ``root``::

    store.json                  {"format": 1, "kind": "maiden-files"}
    create.lock                 flock'd by every create_run (idempotency keys, run ids)
    threads/{name}.json         a thread's snapshot: entries, runs, transitions, deliveries
    threads/{name}.lock         flock'd around every read-modify-write of that snapshot
    runs/{name}                 pointer: the thread that holds a run
    idempotency/{sha256(key)}   pointer: the run that holds an idempotency key
    deliveries/{sha256(key)}    pointer: the thread that holds a delivery record

Every file is written to a temp file in its folder, fsynced, renamed over the old
one, and the folder is fsynced: a reader sees the old version or the new one,
never a torn file, and needs no lock. Pointers are written before the snapshot
that makes them true, so a crash can leave a dangling pointer (ignored, later
overwritten) but never a run or a delivery that cannot be found.

Unlike SQLite, a checkpoint rewrites the whole snapshot: its cost grows with the
thread's length. POSIX only (``fcntl.flock``); fine on a local disk, not on NFS.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

from ..entries import Entry, ToolResult
from ..errors import CorruptStore, NotFound, StaleWrite, StoreError
from ..runs import DELIVERY, Delivery, Run, RunState, Transition
from .base import ENTRIES, Checkpoint, StoreStats, ThreadInfo, check_thread_id
from .files_control import FilesControl

__all__ = ["FilesStore", "thread_file_name"]

FORMAT = 1
_MAX_NAME = 180
# Lowercase only: an uppercase letter is escaped, so names stay distinct on
# case-insensitive file systems, where the escapes' own hex digits fold harmlessly.
_LITERAL = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-")
# A writer holds its temp file for milliseconds; one this old was left by a crash.
_STALE_TEMP_S = 3600.0

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def thread_file_name(thread_id: str) -> str:
    """The stem of a thread's files (``{stem}.json``, ``{stem}.lock``): injective, never a path.

    The UTF-8 bytes of the id in ``[a-z0-9-]`` are kept and every other byte becomes
    ``_XX`` (uppercase hex), after a ``t-`` prefix so that the empty id has a name:
    ``a/b`` -> ``t-a_2Fb``, ``a_b`` -> ``t-a_5Fb``, ``..`` -> ``t-_2E_2E``. Uppercase
    letters are escaped as well (``A`` -> ``t-_41``), so two ids never share a file on
    a case-insensitive file system (macOS, Windows) either. A name longer than 180
    characters becomes ``h-{sha256(id)}`` instead; the prefixes keep the two forms
    apart, and the snapshot stores the id itself, checked on every load, in case two
    ids ever hash alike.
    """
    check_thread_id(thread_id)
    return _encode(thread_id, "t-")


def _encode(text: str, prefix: str) -> str:
    # surrogatepass keeps this injective for run ids, which are not checked like thread ids.
    data = text.encode("utf-8", "surrogatepass")
    if len(prefix) + len(data) <= _MAX_NAME:
        name = prefix + "".join(chr(b) if b in _LITERAL else f"_{b:02X}" for b in data)
        if len(name) <= _MAX_NAME:
            return name
    return "h-" + hashlib.sha256(data).hexdigest()


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Snapshot:
    """A thread's file, parsed. Entries and records stay raw JSON until someone asks for them."""

    thread_id: str
    created_at: float
    updated_at: float
    entries: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"inserted", "run"}
    transitions: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[dict[str, Any]] = field(default_factory=list)

    def dump(self) -> bytes:
        # ensure_ascii: any str survives the round trip, lone surrogates included.
        return json.dumps({
            "format": FORMAT,
            "thread_id": self.thread_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "entries": self.entries,
            "runs": self.runs,
            "transitions": self.transitions,
            "deliveries": self.deliveries,
        }, separators=(",", ":")).encode("ascii")

    def run(self, path: Path, run_id: str) -> Run | None:
        stored = self.runs.get(run_id)
        return None if stored is None else _validate(path, Run, stored.get("run"))

    def ordered_runs(self, path: Path) -> list[tuple[tuple[float, int], Run]]:
        """``((created_at, inserted), run)`` pairs: the order SQLite's rowid gives."""
        pairs = []
        for stored in self.runs.values():
            run = _validate(path, Run, stored.get("run"))
            inserted = stored.get("inserted")
            if not isinstance(inserted, int):
                raise CorruptStore(f"{path}: run {run.id} has no insertion stamp")
            pairs.append(((run.created_at, inserted), run))
        return pairs


def _parse_snapshot(path: Path, data: bytes, thread_id: str | None) -> _Snapshot:
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"not a format {FORMAT} thread snapshot")
        snap = _Snapshot(
            thread_id=raw["thread_id"],
            created_at=float(raw["created_at"]),
            updated_at=float(raw["updated_at"]),
            entries=raw["entries"],
            runs=raw["runs"],
            transitions=raw["transitions"],
            deliveries=raw["deliveries"],
        )
        if not isinstance(snap.thread_id, str):
            raise ValueError("thread_id is not a string")
        if not isinstance(snap.runs, dict) or not _objects(snap.runs.values()):
            raise ValueError("runs is not an object of objects")
        for records in (snap.entries, snap.transitions, snap.deliveries):
            if not isinstance(records, list) or not _objects(records):
                raise ValueError("entries, transitions and deliveries must be lists of objects")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptStore(f"{path}: unreadable thread snapshot: {exc}") from exc
    if thread_id is not None and snap.thread_id != thread_id:
        raise CorruptStore(f"{path} holds thread {snap.thread_id!r}, not {thread_id!r}")
    return snap


def _objects(records: Iterable[object]) -> bool:
    return all(isinstance(record, dict) for record in records)


def _validate(path: Path, model: type[M], raw: Any) -> M:
    try:
        return model.model_validate(raw)
    except ValueError as exc:
        raise CorruptStore(f"{path}: unreadable {model.__name__}: {exc}") from exc


def _delivery(path: Path, raw: Any) -> Delivery:
    try:
        return DELIVERY.validate_python(raw)
    except ValueError as exc:
        raise CorruptStore(f"{path}: unreadable delivery: {exc}") from exc


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_atomic(path: Path, data: bytes, *, fsync: bool) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        # The rename itself is durable only once the folder is.
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def _flock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; give up with ``StoreError`` after ``timeout_s``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreError(f"{path}: still locked by another writer "
                                     f"after {timeout_s:g} s") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


class FilesStore(FilesControl):
    """Files-backed ``Store``; use as ``async with FilesStore(root) as store``.

    ``fsync=False`` trades durability against power loss for speed (a killed process
    still never leaves a torn file). ``lock_timeout_s`` bounds the wait for another
    process's write, like SQLite's busy timeout.
    """

    def __init__(
        self, root: str | Path, *, fsync: bool = True, lock_timeout_s: float = 10.0
    ) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.lock_timeout_s = lock_timeout_s
        self._is_open = False
        self._last_stamp = 0
        # In-process locks keep concurrent tasks from queueing up worker threads on a
        # flock; the flock is what makes writers of other processes wait.
        self._create_lock = asyncio.Lock()
        self._thread_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    async def __aenter__(self) -> FilesStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if not self._is_open:
            await self._to_thread(self._open)
            self._is_open = True

    async def close(self) -> None:
        self._is_open = False

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        async with self._create_lock:
            return await self._io(self._create_run, run)

    async def commit(self, checkpoint: Checkpoint) -> None:
        name = thread_file_name(checkpoint.thread_id)
        async with self._thread_lock(name):
            await self._io(self._commit, checkpoint)

    async def load_entries(self, thread_id: str) -> list[Entry]:
        check_thread_id(thread_id)
        return await self._io(self._load_entries, thread_id)

    async def get_run(self, run_id: str) -> Run:
        found = await self._io(self._find_run, run_id)
        if found is None:
            raise NotFound(f"no run {run_id!r}")
        return found[1]

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if thread_id is not None:
            check_thread_id(thread_id)
        return await self._io(self._list_runs, thread_id, states, limit)

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        threads = await self._io(self._list_threads)
        return threads[offset:] if limit is None else threads[offset:offset + limit]

    async def stats(self) -> StoreStats:
        runs = await self.list_runs()
        deliveries = await self.deliveries()
        pending = sum(1 for d in deliveries if d.remote_id is None)
        return StoreStats(runs=dict(Counter(r.state for r in runs)),
                          threads=len(await self._io(self._list_threads)),
                          deliveries_pending=pending, deliveries_sent=len(deliveries) - pending)

    async def transitions(self, run_id: str) -> list[Transition]:
        return await self._io(self._transitions, run_id)

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None
    ) -> list[Delivery]:
        return await self._io(self._deliveries, run_id, pending)

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        thread_id = await self._io(self._delivery_thread, key)
        if thread_id is None:
            raise NotFound(f"no delivery {key!r}")
        async with self._thread_lock(_encode(thread_id, "t-")):
            await self._io(self._mark_delivered, thread_id, key, remote_id, at)

    # -- plumbing

    async def _io(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if not self._is_open:
            raise StoreError("the store is not open")
        return await self._to_thread(fn, *args, **kwargs)

    async def _to_thread(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except OSError as exc:
            raise StoreError(f"{self.root}: {exc}") from exc

    def _thread_lock(self, name: str) -> asyncio.Lock:
        lock = self._thread_locks.get(name)
        if lock is None:
            lock = self._thread_locks[name] = asyncio.Lock()
        return lock

    def _thread_path(self, thread_id: str, suffix: str = ".json") -> Path:
        return self.root / "threads" / (_encode(thread_id, "t-") + suffix)

    def _lock(self, path: Path) -> contextlib.AbstractContextManager[None]:
        return _flock(path, self.lock_timeout_s)

    def _write(self, path: Path, data: bytes) -> None:
        _write_atomic(path, data, fsync=self.fsync)

    def _stamp(self) -> int:
        """Insertion order of runs across threads and processes (SQLite's rowid)."""
        self._last_stamp = max(time.time_ns(), self._last_stamp + 1)
        return self._last_stamp

    # -- synchronous work, run in a worker thread

    def _open(self) -> None:
        folders = [self.root / sub for sub in ("threads", "runs", "idempotency", "deliveries")]
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        marker = self.root / "store.json"
        data = _read(marker)
        if data is None:
            self._write(marker, json.dumps({"format": FORMAT, "kind": "maiden-files"}).encode())
        else:
            try:
                found = json.loads(data).get("format")
            except (ValueError, AttributeError) as exc:
                raise CorruptStore(f"{marker}: unreadable: {exc}") from exc
            if found != FORMAT:
                raise StoreError(f"{self.root} has format {found!r}; "
                                 f"this maiden reads format {FORMAT}")
        cutoff = time.time() - _STALE_TEMP_S
        for folder in [self.root, *folders]:
            for tmp in folder.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    if tmp.stat().st_mtime < cutoff:
                        tmp.unlink()

    def _load(self, thread_id: str) -> _Snapshot | None:
        path = self._thread_path(thread_id)
        data = _read(path)
        return None if data is None else _parse_snapshot(path, data, thread_id)

    def _save(self, snap: _Snapshot) -> None:
        self._write(self._thread_path(snap.thread_id), snap.dump())

    def _all_snapshots(self) -> Iterator[tuple[Path, _Snapshot]]:
        for path in sorted((self.root / "threads").glob("*.json")):
            data = _read(path)
            if data is None:
                continue
            snap = _parse_snapshot(path, data, None)
            if path.stem != _encode(snap.thread_id, "t-"):
                raise CorruptStore(f"{path} holds thread {snap.thread_id!r}, "
                                   "which is not stored under that name")
            yield path, snap

    def _read_pointer(self, path: Path, name: str, value: str) -> dict[str, Any] | None:
        data = _read(path)
        if data is None:
            return None
        try:
            pointer = json.loads(data)
            if not isinstance(pointer, dict) or pointer.get(name) != value:
                raise ValueError(f"it does not point from {name} {value!r}")
            if not all(isinstance(v, str) for v in pointer.values()):
                raise ValueError("a value is not a string")
        except ValueError as exc:
            raise CorruptStore(f"{path}: unreadable pointer: {exc}") from exc
        return pointer

    def _write_pointer(self, path: Path, pointer: dict[str, str]) -> None:
        self._write(path, json.dumps(pointer).encode("ascii"))

    def _run_pointer(self, run_id: str) -> Path:
        return self.root / "runs" / _encode(run_id, "r-")

    def _delivery_pointer(self, key: str) -> Path:
        return self.root / "deliveries" / _digest(key)

    def _find_run(self, run_id: str) -> tuple[_Snapshot, Run] | None:
        pointer = self._read_pointer(self._run_pointer(run_id), "run_id", run_id)
        if pointer is None:
            return None
        snap = self._load(pointer["thread_id"])
        run = None if snap is None else snap.run(self._thread_path(snap.thread_id), run_id)
        return None if snap is None or run is None else (snap, run)

    def _create_run(self, run: Run) -> Run:
        with self._lock(self.root / "create.lock"):
            key_path = None
            if run.idempotency_key is not None:
                key_path = self.root / "idempotency" / _digest(run.idempotency_key)
                pointer = self._read_pointer(key_path, "key", run.idempotency_key)
                if pointer is not None:
                    found = self._find_run(pointer["run_id"])
                    if found is not None:
                        return found[1]
            if self._find_run(run.id) is not None:
                raise StoreError(f"run {run.id!r} already exists")
            if key_path is not None:
                self._write_pointer(key_path, {"key": str(run.idempotency_key), "run_id": run.id})
            self._write_pointer(self._run_pointer(run.id),
                                {"run_id": run.id, "thread_id": run.thread_id})
            with self._lock(self._thread_path(run.thread_id, ".lock")):
                snap = self._load(run.thread_id) or _Snapshot(
                    run.thread_id, created_at=run.created_at, updated_at=run.created_at)
                if run.id in snap.runs:
                    raise StoreError(f"run {run.id!r} already exists")
                snap.runs[run.id] = {"inserted": self._stamp(), "run": run.model_dump(mode="json")}
                self._save(snap)
        return run

    def _commit(self, cp: Checkpoint) -> None:
        if cp.position is None and cp.entries:
            raise StoreError("a checkpoint with entries needs a position")
        if cp.run is not None and cp.run.thread_id != cp.thread_id:
            raise StoreError(f"run {cp.run.id} belongs to thread {cp.run.thread_id!r}, "
                             f"not {cp.thread_id!r}")
        if cp.position is None and cp.run is None and not cp.transitions and not cp.deliveries:
            return
        path = self._thread_path(cp.thread_id)
        with self._lock(self._thread_path(cp.thread_id, ".lock")):
            snap = self._load(cp.thread_id)
            # Every check comes before the first write: a StaleWrite writes nothing.
            if cp.position is not None and (snap is None or len(snap.entries) != cp.position):
                raise StaleWrite(f"thread {cp.thread_id!r} moved past position {cp.position}")
            if cp.run is not None:
                current = None if snap is None else snap.run(path, cp.run.id)
                if current is None or current.version != cp.run.version - 1:
                    raise StaleWrite(f"run {cp.run.id} is not at version {cp.run.version - 1}")
            if snap is None:
                raise NotFound(f"no thread {cp.thread_id!r}")
            entries = self._new_entries(snap, cp.entries)
            deliveries = self._new_deliveries(snap, cp.deliveries)

            for delivery in deliveries:
                self._write_pointer(self._delivery_pointer(delivery.key),
                                    {"key": delivery.key, "thread_id": cp.thread_id})
            snap.entries.extend(entries)
            if cp.run is not None:
                snap.runs[cp.run.id] = {"inserted": snap.runs[cp.run.id].get("inserted"),
                                        "run": cp.run.model_dump(mode="json")}
                if cp.position is not None:
                    snap.updated_at = cp.run.updated_at
            snap.transitions.extend(t.model_dump(mode="json") for t in cp.transitions)
            snap.deliveries.extend(d.model_dump(mode="json") for d in deliveries)
            self._save(snap)

    @staticmethod
    def _new_entries(snap: _Snapshot, entries: Sequence[Entry]) -> list[dict[str, Any]]:
        """The entries as JSON; ``StaleWrite`` if a tool call already has its result."""
        recorded = {(e.get("run_id"), e.get("tool_call_id"))
                    for e in snap.entries if e.get("kind") == "tool_result"}
        rows = []
        for entry in entries:
            if isinstance(entry, ToolResult):
                call = (entry.run_id, entry.tool_call_id)
                if call in recorded:
                    raise StaleWrite(f"a result for tool call {entry.tool_call_id!r} of run "
                                     f"{entry.run_id} is already recorded")
                recorded.add(call)
            rows.append(entry.model_dump(mode="json"))
        return rows

    def _new_deliveries(self, snap: _Snapshot, deliveries: Sequence[Delivery]) -> list[Delivery]:
        """The deliveries whose key is not taken yet, here or in another thread."""
        taken = {d.get("key") for d in snap.deliveries}
        new = []
        for delivery in deliveries:
            if delivery.key in taken:
                continue
            taken.add(delivery.key)
            elsewhere = self._delivery_thread(delivery.key)
            if elsewhere is not None and elsewhere != snap.thread_id:
                other = self._load(elsewhere)
                if other is not None and any(d.get("key") == delivery.key
                                             for d in other.deliveries):
                    continue
            new.append(delivery)
        return new

    def _load_entries(self, thread_id: str) -> list[Entry]:
        snap = self._load(thread_id)
        if snap is None:
            return []
        try:
            return ENTRIES.validate_python(snap.entries)
        except ValueError as exc:
            raise CorruptStore(f"{self._thread_path(thread_id)}: unreadable entry: {exc}") \
                from exc

    def _list_runs(
        self, thread_id: str | None, states: Sequence[RunState] | None, limit: int | None
    ) -> list[Run]:
        if thread_id is not None:
            snap = self._load(thread_id)
            snaps = [] if snap is None else [(self._thread_path(thread_id), snap)]
        else:
            snaps = list(self._all_snapshots())
        pairs = [pair for path, snap in snaps for pair in snap.ordered_runs(path)]
        if states is not None:
            wanted = {RunState(state) for state in states}
            pairs = [(order, run) for order, run in pairs if run.state in wanted]
        pairs.sort(key=lambda pair: pair[0])
        if limit is not None and limit >= 0:  # SQLite reads a negative LIMIT as none
            pairs = pairs[max(0, len(pairs) - limit):]
        return [run for _, run in pairs]

    def _list_threads(self) -> list[ThreadInfo]:
        infos = []
        for path, snap in self._all_snapshots():
            runs = snap.ordered_runs(path)
            last = max(runs, key=lambda pair: pair[0])[1].state if runs else None
            infos.append(ThreadInfo(id=snap.thread_id, length=len(snap.entries),
                                    created_at=snap.created_at, updated_at=snap.updated_at,
                                    runs=len(runs), last_state=last))
        infos.sort(key=lambda info: (-info.updated_at, info.id))
        return infos

    def _transitions(self, run_id: str) -> list[Transition]:
        found = self._find_run(run_id)
        if found is None:
            return []
        snap, _ = found
        path = self._thread_path(snap.thread_id)
        return [_validate(path, Transition, raw) for raw in snap.transitions
                if raw.get("run_id") == run_id]

    def _deliveries(self, run_id: str | None, pending: bool | None) -> list[Delivery]:
        found = [_delivery(path, raw)
                 for path, snap in self._all_snapshots() for raw in snap.deliveries]
        if run_id is not None:
            found = [d for d in found if d.run_id == run_id]
        if pending is not None:
            found = [d for d in found if (d.remote_id is None) == pending]
        found.sort(key=lambda d: d.created_at)
        return found

    def _delivery_thread(self, key: str) -> str | None:
        pointer = self._read_pointer(self._delivery_pointer(key), "key", key)
        return None if pointer is None else pointer["thread_id"]

    def _mark_delivered(self, thread_id: str, key: str, remote_id: str, at: float) -> None:
        path = self._thread_path(thread_id)
        with self._lock(self._thread_path(thread_id, ".lock")):
            snap = self._load(thread_id) or _Snapshot(thread_id, created_at=0.0, updated_at=0.0)
            for i, raw in enumerate(snap.deliveries):
                if raw.get("key") == key:
                    delivery = _delivery(path, raw)
                    if delivery.remote_id is not None:
                        return
                    delivered = delivery.model_copy(
                        update={"remote_id": remote_id, "delivered_at": at})
                    snap.deliveries[i] = delivered.model_dump(mode="json")
                    self._save(snap)
                    return
        raise NotFound(f"no delivery {key!r}")
