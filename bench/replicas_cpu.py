"""Workload 9's reading of ``/proc``: the CPU seconds of the whole machine (and the
hypervisor's steal), of each replica, of the local PostgreSQL server and its backends, of
the model's process and of the bench's own; and which local ports a process's connections
to the server use (what ``pg_stat_activity.client_port`` shows for their backends)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cpu", "client_ports", "cpu", "machine", "postgres_seconds", "postmaster",
           "proc_seconds", "stat_fields"]

_TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int | str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def proc_seconds(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of a process (with ``reaped``: and of its children it has waited for)."""
    fields = stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICK


def machine() -> tuple[float, float, float]:
    """(busy, steal, all) CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy / _TICK, steal / _TICK, (busy + idle + iowait + steal) / _TICK


def postmaster() -> int | None:
    """The local PostgreSQL server's main process, if there is one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(entry.name)
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if fields is not None and comm in ("postgres", "postmaster") and fields[1] == "1":
            return int(entry.name)
    return None


def postgres_seconds(postmaster: int) -> float:
    """The server's CPU seconds: the postmaster, its live children (backends, WAL writer,
    ...) and the children that have exited (reaped by the postmaster)."""
    total = proc_seconds(postmaster, reaped=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields is not None and fields[1] == str(postmaster):
                total += proc_seconds(int(entry.name))
    return total


def client_ports(pids: Sequence[int], server_port: int) -> list[int]:
    """The local ports of the TCP connections these processes hold to ``server_port``:
    what ``pg_stat_activity.client_port`` shows for their backends."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[9] in inodes \
                        and int(parts[2].rsplit(":", 1)[1], 16) == server_port:
                    ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class Cpu:
    at: float
    machine: tuple[float, float, float]
    replicas: list[float]
    postgres: float | None
    model: float
    client: float


def cpu(replicas: Sequence[int], postmaster: int | None, model: int) -> Cpu:
    return Cpu(at=time.perf_counter(), machine=machine(),
                replicas=[proc_seconds(p) for p in replicas],
                postgres=None if postmaster is None else postgres_seconds(postmaster),
                model=proc_seconds(model), client=proc_seconds(os.getpid()))
