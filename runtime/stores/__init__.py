"""Stores: where threads and runs live, and a thread's end kept in memory (``tail``). Every
backend passes one contract suite."""

from .base import (
    BlobStore,
    Checkpoint,
    ControlStore,
    FeedbackStore,
    LeaseStore,
    NoteStore,
    OutboxStore,
    RunStore,
    ScheduleStore,
    Store,
    ThreadInfo,
)
from .erasure import Erased, ThreadEraser
from .files import FilesStore
from .sqlite import SQLiteStore

__all__ = ["BlobStore", "Checkpoint", "ControlStore", "Erased", "FeedbackStore", "FilesStore",
           "LeaseStore", "NoteStore", "OutboxStore", "RunStore", "SQLiteStore", "ScheduleStore",
           "Store", "ThreadEraser", "ThreadInfo"]
