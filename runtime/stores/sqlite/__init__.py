"""The SQLite store (the default): ``SQLiteStore`` (``store``) is made of one class per
role over ``SQLiteCore`` (``core``: the connections): ``runs`` (with ``reads``), ``outbox``,
``control``, ``leases``, ``schedules``, ``notes``; ``thread`` and ``commit`` are the
connections' threads and the group commit, ``schema`` and ``sql`` the tables and rows,
``mark`` this process's row in ``meta`` (what tells a copy put over the file)."""

from .commit import WriteCounts
from .store import SHORT_THREAD, SQLiteStore, Synchronous

__all__ = ["SHORT_THREAD", "SQLiteStore", "Synchronous", "WriteCounts"]
