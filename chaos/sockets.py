"""Which process holds a TCP connection: the client end of a connection a fake server
sees (its peer's port), found in ``/proc/net/tcp`` and the processes' open files (Linux)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

__all__ = ["pid_of_client"]


def _inodes(port: int) -> set[str]:
    """The socket inodes whose local port is ``port`` (IPv4 and IPv6)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found - {"0"}


def pid_of_client(port: int, pids: Iterable[int]) -> int | None:
    """Which of ``pids`` has a socket whose local port is ``port`` open (None: none)."""
    inodes = {f"socket:[{inode}]" for inode in _inodes(port)}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return pid
    return None
