"""Whether the file a store opened is still the one at its path.

An open SQLite database keeps working after ``rm data/maiden.db*``: its connections hold
the deleted inode, every write succeeds, and all of it is gone when the process exits.
The same goes for a file put at the path meanwhile (a restored backup): the process
writes to the old one, the next start reads the new one. SQLite cannot tell (``PRAGMA
data_version`` sees other connections' commits, not an unlink), so the store compares
the path's device and inode with those it opened, with one ``os.stat``: once per
accepted message and per heartbeat, never per checkpoint. Once lost, always lost: the
process must start again on the store that is there now. A failed flush to disk loses the
store the same way (``lose``): what the disk holds of the writes before it is unknown.

A file overwritten in place (``cp backup.db data/maiden.db``: same inode, other bytes) is
told by what it holds, not by its inode: each store writes a random identity when it is
created, and the store's ``verify`` reads it again (with what this process wrote at open).
That read is made only when the watched file's size, mtime or ctime differ from those it
was last verified with: the same ``os.stat`` serves both checks, so an accepted message
costs nothing more unless the file was written since (for SQLite in WAL mode, only a
checkpoint writes it: one read per checkpoint, every few hundred commits).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import StoreError, StoreGone

__all__ = ["FileIdentity", "Unsure", "flush_failed"]

log = logging.getLogger("maiden.store")


def flush_failed(what: str, error: object) -> str:
    """Why a store is lost after a failed flush to disk: ``what`` (``…-wal: a flush of the
    write-ahead log``) failed with ``error``."""
    return (f"{what} to disk failed ({error}); what it held may not be on disk, and a later "
            "flush would not say so: nothing more is accepted, restart maiden")


class Unsure(StoreError):
    """Raised by a ``verify`` that cannot tell now (the file is busy): asked again later."""


Verify = Callable[[], str | None]
"""Reads the store's identity again: why it is not the store opened (``holds another
store …``), or None; ``Unsure`` if it cannot tell now."""


class FileIdentity:
    """The (device, inode) a path named when the store opened it, and what the file
    ``watched`` held (``verify``); ``gone`` says if both still hold."""

    __slots__ = ("_lost", "_pinned", "_seen", "_verify", "path", "watched", "what")

    def __init__(self, path: Path, what: str, *, watched: Path | None = None,
                 verify: Verify | None = None) -> None:
        self.path = path
        self.what = what
        """What the path is, for the message: ``the database file``, ``the store folder``."""
        self.watched = watched
        """The file that holds the identity ``verify`` reads: ``path`` itself, a file in it,
        or None (nothing verified)."""
        self._verify = verify
        self._pinned: tuple[int, int] | None = None
        self._seen: tuple[int, ...] | None = None
        self._lost: str | None = None

    def pin(self) -> None:
        """Remember what the path names now (the store has just opened it, and written its
        identity)."""
        st = os.stat(self.path)
        self._pinned, self._lost = (st.st_dev, st.st_ino), None
        self._seen = None if self.watched is None else _written(
            st if self.watched == self.path else os.stat(self.watched))

    @property
    def lost(self) -> str | None:
        """Why the store's file is gone, if ``gone`` found so already (no I/O)."""
        return self._lost

    def gone(self) -> str | None:
        """Why what the store opened is no longer at its path, or None. The first time it
        finds so, it says so in one log line."""
        if self._lost is not None or self._pinned is None:
            return self._lost
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            change = "was deleted"
        except OSError:
            return None  # cannot tell (a permission change): the writes will say
        else:
            if (st.st_dev, st.st_ino) != self._pinned:
                change = "was replaced by another file"
            else:
                overwritten = self._overwritten(st)
                if overwritten is None:
                    return None
                change = f"was overwritten ({overwritten})"
        self._lost = (f"{self.what} {self.path} {change} while this process had it open; "
                      "nothing more is accepted (it would be written where nobody reads "
                      "it): restart maiden")
        log.error("store lost: %s", self._lost)
        return self._lost

    def _overwritten(self, st: os.stat_result) -> str | None:
        """Why the watched file no longer holds this store, if it was written since it was
        last verified (its size, mtime or ctime differ); None if not, or if it cannot tell."""
        if self.watched is None or self._verify is None:
            return None
        try:
            seen = _written(st if self.watched == self.path else os.stat(self.watched))
        except FileNotFoundError:
            return f"{self.watched.name} was deleted"
        except OSError:
            return None
        if seen == self._seen:
            return None
        try:
            problem = self._verify()
        except Unsure:
            return None  # asked again next time: the file still differs from ``_seen``
        if problem is None:
            self._seen = seen  # written by a checkpoint (this process's or another's)
        return problem

    def lose(self, why: str) -> None:
        """The store is not to be trusted any more for another reason (a flush of its log
        failed): from now on it is lost as if its file had gone, said in one log line."""
        if self._lost is None:
            self._lost = why
            log.error("store lost: %s", why)

    def check(self) -> None:
        """Raise ``StoreGone`` if ``gone``."""
        problem = self.gone()
        if problem is not None:
            raise StoreGone(problem)

    def check_lost(self) -> None:
        """Raise ``StoreGone`` if ``gone`` found so already (no I/O: for every write)."""
        if self._lost is not None:
            raise StoreGone(self._lost)


def _written(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is written: its inode, size, mtime and ctime (``cp -p``
    sets the mtime back; not the ctime)."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
