"""The PostgreSQL store, for replicas: ``PostgresStore`` (``store``) is made of one class
per role over ``PostgresCore`` (``core``: the pool): ``runs``, ``outbox``, ``control``,
``leases``, ``schedules``, ``notes``; ``schema`` creates and migrates the tables, ``sql``
writes a checkpoint's rows, ``listen`` holds the one connection notifications come on."""

from .store import PostgresStore

__all__ = ["PostgresStore"]
