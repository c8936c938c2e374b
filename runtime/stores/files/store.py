"""The files store: one JSON snapshot per thread and small files beside them (the layout is
``core``'s), built from its roles (each over ``FilesCore``, the ``Disk``): ``runs``,
``outbox``, ``control``, ``leases``, ``schedules``, ``notes``, ``memories``, ``feedback``,
``blobs``, ``knowledge``, ``erase``."""

from __future__ import annotations

from .blobs import FilesBlobs
from .control import FilesControl
from .erase import FilesErasure
from .feedback import FilesFeedback
from .knowledge import FilesKnowledge
from .leases import FilesLeases
from .memories import FilesMemories
from .notes import FilesNotes
from .outbox import FilesOutbox
from .runs import FilesRuns
from .schedules import FilesSchedules

__all__ = ["FilesStore"]


class FilesStore(FilesRuns, FilesOutbox, FilesControl, FilesLeases, FilesSchedules,
                 FilesNotes, FilesMemories, FilesFeedback, FilesBlobs, FilesKnowledge,
                 FilesErasure):
    """Files-backed ``Store``; use as ``async with FilesStore(root) as store`` (its options
    are ``FilesCore``'s)."""
