"""The files store: ``FilesStore`` (``store``) is made of one class per role over
``FilesCore`` (``core``: the ``Disk`` and the layout): ``runs``, ``outbox``, ``control``,
``leases``, ``schedules``, ``notes``; ``fs`` is the atomic writes and locks, ``folders``,
``names`` and ``snapshot`` the layout."""

from .names import thread_file_name
from .store import FilesStore

__all__ = ["FilesStore", "thread_file_name"]
