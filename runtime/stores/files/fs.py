"""Filesystem primitives of the files store: atomic replace, ``flock`` with a timeout, reads.

Every write goes to a temp file in the target's folder, is fsynced, renamed over
the old file, and the folder is fsynced: a reader sees the old version or the new
one, never a torn file, and needs no lock. ``Disk`` bundles these with the store's
settings and its worker-thread plumbing; the store and its control plane share one.
POSIX only (``fcntl.flock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ParamSpec, TypeVar

from ...errors import StoreError, StoreGone
from ..identity import flush_failed

__all__ = ["Disk", "flock", "read_or_none", "remove_stale_temp_files", "sync_folder",
           "write_atomic"]

P = ParamSpec("P")
T = TypeVar("T")

# A writer holds its temp file for milliseconds; one this old was left by a crash.
_STALE_TEMP_S = 3600.0


def read_or_none(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` if it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write_atomic(path: Path, data: bytes, *, fsync: bool) -> None:
    """Replace ``path`` with ``data`` all at once; ``fsync``: durably, folder included."""
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
        sync_folder(path.parent, f"{path.name} replaced")


def sync_folder(folder: Path, done: str) -> None:
    """Flush ``folder`` (what was renamed or removed in it, ``done``, is durable after)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Readers see the change already; whether the disk has it is unknown, and a later
        # flush that succeeds would not say: not a write to try again.
        raise StoreGone(flush_failed(f"{folder}: a flush of the folder",
                                     f"{exc}, {done}")) from exc
    finally:
        os.close(fd)


@contextmanager
def flock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; give up with ``StoreError`` after ``timeout_s``.

    A lock file may be removed by its holder (an erased thread's): a writer that waited on
    the removed file finds, once it has the lock, that ``path`` is no longer that file, and
    takes the lock of the file there now instead."""
    deadline = time.monotonic() + timeout_s
    delay = 0.0005
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
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
            if _same_file(fd, path):
                yield
                return
        finally:
            os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)


def remove_stale_temp_files(folders: Iterable[Path]) -> None:
    """Delete temp files a crashed writer left; younger ones may be another process's write."""
    cutoff = time.time() - _STALE_TEMP_S
    for folder in folders:
        for tmp in folder.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()


class Disk:
    """A store's root folder, its settings (as ``FilesStore`` takes them) and open state.

    The store and its control plane share one, so both refuse work on a closed store
    and both turn ``OSError`` into ``StoreError`` the same way.
    """

    def __init__(self, root: Path, *, fsync: bool, lock_timeout_s: float) -> None:
        self.root = root
        self.fsync = fsync
        self.lock_timeout_s = lock_timeout_s
        self.is_open = False
        self.lost: Callable[[str], None] = lambda why: None
        """Called with why when a flush of the folder failed (the store is lost)."""
        self._failed: str | None = None

    def lock(self, path: Path) -> contextlib.AbstractContextManager[None]:
        return flock(path, self.lock_timeout_s)

    def write(self, path: Path, data: bytes) -> None:
        """``write_atomic``; after a failed flush of a folder, ``StoreGone`` for every write."""
        if self._failed is not None:
            raise StoreGone(self._failed)
        try:
            write_atomic(path, data, fsync=self.fsync)
        except StoreGone as exc:
            self._failed = str(exc)
            self.lost(self._failed)
            raise

    def rename(self, path: Path, to: Path) -> None:
        """Rename ``path`` to ``to`` (replacing it) at once; durably, folder included."""
        if self._failed is not None:
            raise StoreGone(self._failed)
        os.replace(path, to)
        if self.fsync:
            self._synced(to.parent, f"{path.name} renamed")

    def remove(self, paths: Iterable[Path]) -> None:
        """Remove the files there are of ``paths``; durably, their folders included."""
        if self._failed is not None:
            raise StoreGone(self._failed)
        folders: dict[Path, None] = {}
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                folders[path.parent] = None
        if self.fsync:
            for folder in folders:
                self._synced(folder, "files removed")

    def _synced(self, folder: Path, done: str) -> None:
        try:
            sync_folder(folder, done)
        except StoreGone as exc:
            self._failed = str(exc)
            self.lost(self._failed)
            raise

    async def open(self, prepare: Callable[[], None]) -> None:
        """Run ``prepare`` (folders, format check) once; from then on ``io`` is allowed."""
        if not self.is_open:
            await self._to_thread(prepare)
            self.is_open = True

    def close(self) -> None:
        self.is_open = False

    async def io(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run blocking ``fn`` in a worker thread of an open store; OSError -> ``StoreError``."""
        if not self.is_open:
            raise StoreError("the store is not open")
        return await self._to_thread(fn, *args, **kwargs)

    async def _to_thread(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except OSError as exc:
            raise StoreError(f"{self.root}: {exc}") from exc
