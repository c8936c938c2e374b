"""Stores: where threads and runs live. Every backend passes one contract suite."""

from .base import Checkpoint, Store, ThreadInfo
from .files import FilesStore
from .sqlite import SQLiteStore

__all__ = ["Checkpoint", "FilesStore", "SQLiteStore", "Store", "ThreadInfo"]
