"""The files store's folders as objects on its ``Disk``: thread snapshots and pointers.

``threads/`` holds one snapshot per thread, ``{stem}.json``, and the ``{stem}.lock``
flock'd around every read-modify-write of it. ``runs/{run name}``,
``idempotency/{sha256(key)}`` and ``deliveries/{sha256(key)}`` are pointers: JSON
objects of strings that include the id or key they point from, because a name may
be a hash and every read checks that the pointer is the one asked for. Pointers
are written before the snapshot that makes them true, so after a crash one may
dangle; whoever follows it treats a missing record as absent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from ...errors import CorruptStore
from .fs import Disk, read_or_none
from .names import thread_stem
from .snapshot import Snapshot, parse_snapshot

__all__ = ["Pointers", "Threads"]


class Threads:
    """``threads/``: a snapshot per thread, read without a lock, written under one."""

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self.folder = disk.root / "threads"

    def path(self, thread_id: str) -> Path:
        return self.folder / f"{thread_stem(thread_id)}.json"

    def lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """The flock that serialises writers of this thread, in every process."""
        return self.disk.lock(self.folder / f"{thread_stem(thread_id)}.lock")

    def load(self, thread_id: str) -> Snapshot | None:
        path = self.path(thread_id)
        data = read_or_none(path)
        return None if data is None else parse_snapshot(path, data, thread_id)

    def save(self, snap: Snapshot) -> None:
        self.disk.write(self.path(snap.thread_id), snap.dump())

    def all(self) -> Iterator[tuple[Path, Snapshot]]:
        """Every snapshot, by file name; one under another thread's name is corrupt."""
        for path in sorted(self.folder.glob("*.json")):
            data = read_or_none(path)
            if data is None:
                continue
            snap = parse_snapshot(path, data, None)
            if path.stem != thread_stem(snap.thread_id):
                raise CorruptStore(f"{path} holds thread {snap.thread_id!r}, "
                                   "which is not stored under that name")
            yield path, snap


class Pointers:
    """One folder of pointers, each named after its ``field`` by ``name``."""

    def __init__(self, disk: Disk, folder: str, field: str, name: Callable[[str], str]) -> None:
        self.disk = disk
        self.folder = disk.root / folder
        self.field = field
        self.name = name

    def get(self, value: str) -> dict[str, str] | None:
        """The pointer from ``value``, or ``None``; ``CorruptStore`` if unreadable."""
        path = self.folder / self.name(value)
        data = read_or_none(path)
        return None if data is None else _parse_pointer(path, data, self.field, value)

    def put(self, **pointer: str) -> None:
        """Write (or overwrite) the pointer from ``pointer[field]``; keys keep their order."""
        path = self.folder / self.name(pointer[self.field])
        self.disk.write(path, json.dumps(pointer).encode("ascii"))


def _parse_pointer(path: Path, data: bytes, field: str, value: str) -> dict[str, str]:
    try:
        pointer = json.loads(data)
        if not isinstance(pointer, dict) or pointer.get(field) != value:
            raise ValueError(f"it does not point from {field} {value!r}")
        if not all(isinstance(v, str) for v in pointer.values()):
            raise ValueError("a value is not a string")
    except ValueError as exc:
        raise CorruptStore(f"{path}: unreadable pointer: {exc}") from exc
    return pointer
