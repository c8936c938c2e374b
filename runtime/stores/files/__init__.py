"""The files store: one JSON snapshot per thread (``store``), the control plane, leases,
schedule records and notes as small files (``control``); ``fs`` is the atomic writes and
locks, ``folders``, ``names`` and ``snapshot`` the layout."""

from .names import thread_file_name
from .store import FilesStore

__all__ = ["FilesStore", "thread_file_name"]
