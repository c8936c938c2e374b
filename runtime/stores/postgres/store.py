"""The PostgreSQL store, for replicas: the SQLite store's rows in a server database, built
from its roles (each over ``PostgresCore``, the pool): ``runs``, ``outbox``, ``control``,
``leases``, ``schedules``, ``notes``, ``memories``, ``feedback``, ``blobs``, ``knowledge``,
``erase``."""

from __future__ import annotations

from .blobs import PostgresBlobs
from .control import PostgresControl
from .erase import PostgresErasure
from .feedback import PostgresFeedback
from .knowledge import PostgresKnowledge
from .leases import PostgresLeases
from .memories import PostgresMemories
from .notes import PostgresNotes
from .outbox import PostgresOutbox
from .runs import PostgresRuns
from .schedules import PostgresSchedules

__all__ = ["PostgresStore"]


class PostgresStore(PostgresRuns, PostgresOutbox, PostgresControl, PostgresLeases,
                    PostgresSchedules, PostgresNotes, PostgresMemories, PostgresFeedback,
                    PostgresBlobs, PostgresKnowledge, PostgresErasure):
    """PostgreSQL-backed ``Store``; use as ``async with PostgresStore(dsn) as store`` (its
    options are ``PostgresCore``'s)."""

    commit_survives_cancel = False
    """A ``commit`` whose caller is cancelled is rolled back (or may have landed, if the
    cancellation came during its COMMIT): callers shield it."""
