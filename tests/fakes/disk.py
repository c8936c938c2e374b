"""The OS's flush of SQLite's write-ahead log (``walsync._datasync``, patched in by a
test), held until the test lets it go: a slow disk, in the OS call only."""

from __future__ import annotations

import asyncio
import errno
import threading

from runtime.stores.sqlite import walsync


class HeldDisk:
    """Each flush is held (while ``hold``) until ``go`` is set, then made, or failed with
    EIO if ``fails``; ``flushing`` is set on the loop once one is held."""

    def __init__(self, *, hold: bool = True) -> None:
        self.loop = asyncio.get_running_loop()
        self.flushing = asyncio.Event()
        self.go = threading.Event()
        self.hold = hold
        self.fails = False
        self.flushes = 0
        self.real = walsync._datasync

    def __call__(self, fd: int) -> None:
        self.flushes += 1
        if self.hold:
            self.loop.call_soon_threadsafe(self.flushing.set)
            if not self.go.wait(10):
                raise OSError("the test never let the flush go")
            if self.fails:
                raise OSError(errno.EIO, "Input/output error")
        self.real(fd)
