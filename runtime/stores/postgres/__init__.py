"""The PostgreSQL store, for replicas: threads and runs in ``store``, the control plane,
leases, schedule records and notes in ``control``; ``schema`` creates and migrates the
tables, ``sql`` writes a checkpoint's rows."""

from .store import PostgresStore

__all__ = ["PostgresStore"]
