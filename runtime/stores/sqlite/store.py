"""The default store: SQLite, one row per entry, built from its roles (each over
``SQLiteCore``, the two connections): ``runs``, ``outbox``, ``control``, ``leases``,
``schedules``, ``notes``, ``memories``, ``feedback``, ``blobs``, ``knowledge``, ``erase``."""

from __future__ import annotations

from .blobs import SQLiteBlobs
from .control import SQLiteControl
from .core import Synchronous
from .erase import SQLiteErasure
from .feedback import SQLiteFeedback
from .knowledge import SQLiteKnowledge
from .leases import SQLiteLeases
from .memories import SQLiteMemories
from .notes import SQLiteNotes
from .outbox import SQLiteOutbox
from .reads import SHORT_THREAD
from .runs import SQLiteRuns
from .schedules import SQLiteSchedules

__all__ = ["SHORT_THREAD", "SQLiteStore", "Synchronous"]


class SQLiteStore(SQLiteRuns, SQLiteOutbox, SQLiteControl, SQLiteLeases, SQLiteSchedules,
                  SQLiteNotes, SQLiteMemories, SQLiteFeedback, SQLiteBlobs, SQLiteKnowledge,
                  SQLiteErasure):
    """SQLite-backed ``Store``; use as ``async with SQLiteStore(path) as store``."""

    commit_survives_cancel = True
    """A ``commit`` whose caller is cancelled still lands whole (it is done at once, or
    handed to the group commit, which finishes it): callers need not shield it."""
