"""The SQLite store (the default): threads and runs in ``store``, the control plane,
leases, schedule records and notes in ``control``; ``thread`` and ``commit`` are the
connections' threads and the group commit, ``schema`` and ``sql`` the tables and rows."""

from .store import SHORT_THREAD, SQLiteStore, Synchronous

__all__ = ["SHORT_THREAD", "SQLiteStore", "Synchronous"]
