"""A small disk for the SQLite pass's database, filled now and then (the fault
``disk_full``): a tmpfs of a few dozen megabytes mounted on the store's folder, filled to
the last byte by a filler file for a few seconds, then freed.

What maiden promises then (docs/guides/operating.md, "When something goes wrong"): the
store that stops taking writes is reported (``/healthz`` 503, one log line), new messages
are refused with ``503 store_error`` (nothing stored: sent again), and runs wait at their
checkpoints and go on once there is room; the invariants hold it to that.

The mount is made in a mount namespace of the soak's own (``unshare(CLONE_NEWNS)``, its
mounts private), which its replicas inherit: nobody else sees it, and it goes with the
last process in it, even when the soak is killed. At the end the database is copied back
onto the real disk, where a kept work dir holds it.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import os
import shutil
import subprocess
import threading
from pathlib import Path

__all__ = ["SmallDisk", "private_mounts"]

CLONE_NEWNS = 0x00020000
FILLER = ".chaos-filler"
_private = [False]  # this process has its own mount namespace already


def private_mounts() -> str | None:
    """Give this process a mount namespace of its own, its mounts private (once; before
    any thread starts: ``unshare`` refuses a process with threads); why not, or None."""
    if _private[0]:
        return None
    if os.geteuid() != 0:
        return "not root (mounting a small disk needs root)"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount and umount are not installed"
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        return f"the soak has threads already (unshare refuses them): {', '.join(others)}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}"
    # Mounts made from here on stay in this namespace (not passed back to the host's).
    done = subprocess.run(["mount", "--make-rprivate", "/"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return f"mount --make-rprivate /: {done.stderr.strip()[:200]}"
    _private[0] = True
    return None


async def _run(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: "
                           f"{out.decode(errors='replace').strip()[:300]}")


class SmallDisk:
    """``async with SmallDisk(folder, size_mb) as disk``: ``folder`` is a tmpfs of
    ``size_mb`` MB until the end; ``disk.fill()`` takes every byte left, ``disk.free()``
    gives them back. Only in a process that ``private_mounts()`` moved."""

    def __init__(self, folder: Path, size_mb: int) -> None:
        self.folder = folder
        self.size_mb = size_mb
        self.full = False

    async def __aenter__(self) -> SmallDisk:
        assert _private[0], "private_mounts() first: a mount here would be the host's"
        self.folder.mkdir(parents=True, exist_ok=True)
        await _run("mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755",
                   "chaos-disk", str(self.folder))
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Free it, copy what it holds onto the real disk (in the folder, once unmounted)."""
        self.free()
        keep = self.folder.with_name(self.folder.name + ".kept")
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(self.folder, keep)
        await _run("umount", str(self.folder))
        for path in keep.iterdir():
            os.replace(path, self.folder / path.name)
        keep.rmdir()

    def fill(self) -> int:
        """Take every byte left (one filler file); how many MB that was."""
        filler = self.folder / FILLER
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            left = os.statvfs(self.folder)
            try:
                os.posix_fallocate(fd, 0, left.f_bavail * left.f_frsize)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
            try:
                while True:  # whatever fallocate left, a page at a time
                    os.write(fd, b"\0" * 4096)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        finally:
            os.close(fd)
        self.full = True
        return filler.stat().st_size >> 20

    def free(self) -> None:
        """Give the filler's bytes back."""
        (self.folder / FILLER).unlink(missing_ok=True)
        self.full = False
