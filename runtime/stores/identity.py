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
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..errors import StoreGone

__all__ = ["FileIdentity", "flush_failed"]

log = logging.getLogger("maiden.store")


def flush_failed(what: str, error: object) -> str:
    """Why a store is lost after a failed flush to disk: ``what`` (``…-wal: a flush of the
    write-ahead log``) failed with ``error``."""
    return (f"{what} to disk failed ({error}); what it held may not be on disk, and a later "
            "flush would not say so: nothing more is accepted, restart maiden")


class FileIdentity:
    """The (device, inode) a path named when the store opened it; ``gone`` says if it
    still does."""

    __slots__ = ("_lost", "_pinned", "path", "what")

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        """What the path is, for the message: ``the database file``, ``the store folder``."""
        self._pinned: tuple[int, int] | None = None
        self._lost: str | None = None

    def pin(self) -> None:
        """Remember what the path names now (the store has just opened it)."""
        st = os.stat(self.path)
        self._pinned, self._lost = (st.st_dev, st.st_ino), None

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
            if (st.st_dev, st.st_ino) == self._pinned:
                return None
            change = "was replaced by another file"
        self._lost = (f"{self.what} {self.path} {change} while this process had it open; "
                      "nothing more is accepted (it would be written where nobody reads "
                      "it): restart maiden")
        log.error("store lost: %s", self._lost)
        return self._lost

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
