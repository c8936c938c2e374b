"""Workload 9's figures: what each phase measured (``Phase``: messages/s, cores, the
database's connections, hand-offs) and the whole run's (``ReplicasResult``)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from .handoffs import Answered, Handoffs

__all__ = ["DbActivity", "Mode", "Phase", "ReplicasResult"]

Mode = Literal["global", "thread"]


@dataclass
class DbActivity:
    """The replicas' connections to the server, averaged over the phase's samples: how many
    were doing what at a time."""

    samples: int = 0
    connections: float = 0.0
    running: float = 0.0
    """Executing a statement, not waiting."""
    io: float = 0.0
    """Waiting on I/O (WAL writes and fsyncs at commit: ``IO`` wait events)."""
    lock: float = 0.0
    """Waiting on a row or table lock (``Lock``: another transaction holds the row)."""
    lwlock: float = 0.0
    """Waiting on one of the server's own locks (``LWLock``: WAL insertion and writing,
    buffers)."""
    other_wait: float = 0.0
    idle_in_transaction: float = 0.0
    """Waiting for the replica: in a transaction between statements (``idle in
    transaction``), or mid-statement for its next protocol message (``Client`` waits)."""
    idle: float = 0.0
    """In the pool, unused."""
    waits: Counter[str] = field(default_factory=Counter)
    """``type:event`` of every wait seen, summed over the samples."""

    @property
    def busy(self) -> float:
        return self.running + self.io + self.lock + self.lwlock + self.other_wait


@dataclass
class Phase:
    mode: Mode
    replicas: int
    threads: int
    messages: int
    """Per thread."""
    latency_s: float
    elapsed_s: float = 0.0
    done: int = 0
    """Messages answered (their run completed)."""
    failed: list[str] = field(default_factory=list)
    timed_out: bool = False
    cut_by_budget: bool = False
    """Timed out at the workload's time budget rather than its own timeout."""
    machine_cores: float = 0.0
    """Cores busy over the phase, every process on the machine."""
    steal_cores: float = 0.0
    """Cores the hypervisor gave to someone else (a shared VM's steal time)."""
    replica_cores: list[float] = field(default_factory=list)
    postgres_cores: float | None = None
    """The local server's processes (all of them: any other client's work too)."""
    backend_cores: float | None = None
    """The server's backends of the replicas' own connections (those seen by the
    sampler): the database's work for this workload alone."""
    model_cores: float = 0.0
    client_cores: float = 0.0
    """This process: the users' HTTP clients and the samplers."""
    db: DbActivity | None = None
    backends: int = 0
    """The replicas' connections seen (each a backend process on the server)."""
    commits_per_s: float | None = None
    wal_syncs_per_s: float | None = None
    model_calls: int = 0
    model_connections: int = 0
    """TCP connections the replicas opened to the model server during the phase."""
    slow: bool = False
    """The variant with a slow model (its threads are tagged apart)."""
    answered: list[Answered] = field(default_factory=list)
    """Each message answered, as its user saw it."""
    handoffs: Handoffs | None = None
    """Acceptance to start, and end to reply, from the store (None: not read)."""

    @property
    def per_second(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def ideal_per_second(self) -> float:
        parallel = min(self.replicas, self.threads) if self.mode == "global" else self.threads
        return parallel / (2 * self.latency_s)

    @property
    def db_cores(self) -> float | None:
        """The database's work for this workload: its backends when they were seen, else
        the whole server's."""
        return self.backend_cores if self.backend_cores is not None else self.postgres_cores

    @property
    def beyond_ms(self) -> float:
        """What a message took beyond its two model calls, ms (from messages/s: each of
        the runs going at once waits for its own messages only)."""
        parallel = min(self.replicas, self.threads) if self.mode == "global" else self.threads
        return (parallel / self.per_second - 2 * self.latency_s) * 1000 \
            if self.per_second else math.nan

    @property
    def tag(self) -> str:
        """What its threads' ids start with: ``bench-t2`` (thread mode, 2 replicas)."""
        return f"bench-{'s' if self.slow else self.mode[0]}{self.replicas}"

    @property
    def ours_cores(self) -> float:
        return (sum(self.replica_cores) + (self.db_cores or 0.0) + self.model_cores
                + self.client_cores)


@dataclass
class ReplicasResult:
    where: str
    threads: int
    messages: int
    latency_s: float
    cores: int
    slow_latency_s: float = 0.0
    """The slow model's latency, for the thread-mode variant with it (0: none)."""
    phases: list[Phase] = field(default_factory=list)
    skipped: str | None = None
    startup_s: list[float] = field(default_factory=list)
    """Each replica's start, until its Ready line."""
    exit_codes: list[int | None] = field(default_factory=list)
    """Each replica's exit status after SIGTERM (None: killed after STOP_S)."""
    log_problems: list[tuple[int, str]] = field(default_factory=list)
    """(count, "level logger: message") for every warning and error in the replicas' logs,
    ids masked; non-JSON lines too."""
    wrong_threads: int | None = None
    """Threads whose entries are not four a message (None: not checked)."""
    run_states: dict[str, int] = field(default_factory=dict)
    model_requests: int = 0
    """Every request the model server saw, warm-ups included."""
    model_connections: int = 0
    budget_s: float = 0.0
    not_measured: list[str] = field(default_factory=list)
    """Phases left out: the workload's time budget was spent."""
    checked_threads: int = 0
