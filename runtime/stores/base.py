"""The storage contract every backend implements (and one test suite checks): the runs and
threads part here, the others in ``parts.py``, composed into ``Store``."""

from __future__ import annotations

import re
from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Self

from pydantic import TypeAdapter

from ..errors import CorruptStore, InvalidThreadId, NotFound
from ..model.entries import Entry
from ..model.requests import (
    ScheduleRecord,
)
from ..model.runs import Delivery, Run, RunState, Transition
from .erasure import ThreadEraser
from .knowledge import KnowledgeStore
from .parts import (
    MEMORY_CALLS_KEPT,
    NOTE_CALLS_KEPT,
    BlobStore,
    ControlStore,
    FeedbackStore,
    LeaseStore,
    MemoryStore,
    NoteStore,
    OutboxStore,
    ScheduleStore,
)
from .tail import Tail

__all__ = ["ENTRIES", "MEMORY_CALLS_KEPT", "NOTE_CALLS_KEPT", "Accepted", "BlobStore",
           "Checkpoint", "ControlStore", "FeedbackStore", "KnowledgeStore", "LeaseStore",
           "MemoryStore", "NoteStore", "OutboxStore", "RunStore",
           "ScheduleStore", "SpendAsk", "SpendScope", "Spending", "Store", "StoreStats",
           "ThreadInfo", "check_digest", "check_thread_id", "parse_schedule_record"]

ENTRIES: TypeAdapter[list[Entry]] = TypeAdapter(list[Entry])


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One atomic write: new entries for a thread and the new state of a run.

    ``position`` is how many entries the writer saw; the store rejects the write
    with ``StaleWrite`` if the thread has moved on since. ``None`` skips that check
    (a write that touches no entries, such as failing a queued run). A ``run``'s
    ``version`` must be exactly one more than the stored one.
    """

    thread_id: str
    position: int | None
    entries: Sequence[Entry] = ()
    run: Run | None = None
    transitions: Sequence[Transition] = ()
    deliveries: Sequence[Delivery] = ()
    durable: bool = True
    """``False``: the store may return before this write is on disk, as long as it lands
    before (or with) the next durable write, which then covers it. For a write that is
    not a durable point: what it records is redone if a power cut loses it."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """A queued run as ``RunStore.accept_run`` stored it."""

    run: Run
    """The run as stored (stamped), or the one that already held its idempotency key."""
    listed: list[Run] | None = None
    """Its thread's runs that have not ended, as that write left them (oldest first, as
    ``list_runs`` gives them), where the store read them with the write at little cost;
    else None (ask ``list_runs``)."""
    on_disk: Coroutine[Any, Any, None] | None = None
    """Where the write is committed but its flush still under way: what to await (once)
    for it to be on disk; ``StoreGone`` if the flush fails. Every durable write made
    after it is on disk only after it too. None: on disk already."""


SpendScope = Literal["user", "agent", "place"]


@dataclass(frozen=True, slots=True)
class SpendAsk:
    """What the runs created at or after ``since`` whose ``scope`` (their person, agent or
    place key) is one of ``keys`` have spent."""

    since: float
    scope: SpendScope
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Spending:
    """The answers to ``SpendAsk``s, in order: ``(tokens, cost_usd)`` each; and the store's
    clock when it read them (None: the store is this machine's, whose clock the runtime
    reads itself)."""

    sums: list[tuple[int, float]]
    now: float | None = None


@dataclass(frozen=True, slots=True)
class StoreStats:
    runs: dict[RunState, int]
    threads: int
    deliveries_pending: int
    deliveries_sent: int


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    id: str
    length: int
    created_at: float
    updated_at: float
    runs: int = 0
    last_state: RunState | None = None


class RunStore(Protocol):
    """Durable threads and runs. Every method is safe to call from concurrent tasks."""

    async def open(self) -> None:
        """Create or migrate the storage; idempotent."""

    async def close(self) -> None: ...

    def gone(self) -> str | None:
        """Why the storage this store opened is no longer where it was (its database file
        or folder deleted, or another one put in its place), or None. Once so, ``create_run``
        and ``commit`` raise ``StoreGone``. Cheap (one ``stat``, and a read of the store's
        identity only when its file was written since the last): asked per accepted message
        and per heartbeat."""

    async def create_run(self, run: Run) -> Run:
        """Persist a queued run (and its thread, if new).

        If ``run.idempotency_key`` is already taken, nothing is written and the run
        that holds the key is returned instead.
        """

    async def accept_run(self, run: Run) -> Accepted:
        """``create_run`` for a message being taken in: a store may return as soon as the
        run is committed (visible to every reader, safe from a kill -9) and its flush to
        the disk is under way (``Accepted.on_disk``), so that its worker starts while the
        disk works; the message is acknowledged only once that flush is done."""
        return Accepted(await self.create_run(run))

    async def commit(self, checkpoint: Checkpoint) -> None:
        """Write a checkpoint atomically, or raise ``StaleWrite`` and write nothing."""

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        """The thread's entries in order (a page of them with ``offset``/``limit``); ``[]``
        for a thread never written."""

    async def load_tail(self, thread_id: str, tokens: int, *, start: int | None = None
                        ) -> Tail:
        """The end of the thread: from the newest user message far enough back that what
        follows it holds at least ``tokens`` estimated tokens, or from ``start`` if that is
        earlier (the whole thread if it holds fewer).

        Precisely: with ``sum[i]`` the ``context.entry_tokens`` of entries ``0..i`` and
        ``total`` that of all, the tail starts at the greatest ``i`` whose entry is a user
        message and ``sum[i] <= total - tokens`` (else 0), or at ``start`` if smaller. The
        summary notices before it are counted, and the newest is given."""

    async def thread_length(self, thread_id: str) -> int:
        """How many entries the thread holds (0 for a thread never written)."""

    async def get_run(self, run_id: str) -> Run:
        """The run, or ``NotFound``."""

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        """The run that holds an idempotency key, or None if none does."""

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        """Runs, oldest first, optionally filtered; with ``limit``, the newest ``limit``."""

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        """Threads, most recently updated first; a page of them with ``offset``/``limit``."""

    async def stats(self) -> StoreStats:
        """Counts for metrics and listings, without reading every row into Python."""

    async def spent(self, asks: Sequence[SpendAsk]) -> Spending:
        """What runs have spent, as last checkpointed, for each ask (a run's keys are
        ``rows.spend_keys``): summed by the store from columns of their own, in one read
        (spend caps ask before each turn)."""

    async def index_spend(self, scopes: Collection[SpendScope]) -> None:
        """Make ``spent`` quick in ``scopes`` (those spend caps are configured for), if it
        is not already: an index of the runs by whose they are in each. ``spent`` answers
        for every scope either way; without its index it reads the period's runs."""

    async def transitions(self, run_id: str) -> list[Transition]:
        """Every state change of the run, in order, with its reason."""


class Store(RunStore, OutboxStore, ControlStore, LeaseStore, ScheduleStore, NoteStore,
            MemoryStore, FeedbackStore, BlobStore, KnowledgeStore, ThreadEraser, Protocol):
    """What a backend implements: runs and threads, the outbox, the control plane, leases,
    schedule records, notes, memories, votes, files' blobs, the knowledge folders'
    passages, and erasing a thread (``erasure``)."""


class Opens:
    """``async with store:`` opens the store and closes it after (for the backends)."""

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def unlistened() -> None:
    """What ``listen_requests`` returns for a store whose readers poll: nothing to stop."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Unicode's control characters (category Cc): C0, DEL, C1."""


def check_thread_id(thread_id: str) -> str:
    """The one rule for thread ids, for every channel and every store: any string that is
    valid Unicode (no lone surrogates) and holds no control character. A NUL, a newline or
    an escape sequence in an id cannot be typed as a command's argument (``maiden show``),
    PostgreSQL cannot store a NUL, and a log line or a terminal would be at its mercy."""
    if not isinstance(thread_id, str):
        raise InvalidThreadId(f"a thread id must be a string, not {type(thread_id).__name__}")
    try:
        thread_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidThreadId(f"thread id is not valid Unicode: {exc.reason}") from exc
    found = _CONTROL.search(thread_id)
    if found is not None:
        raise InvalidThreadId(f"a thread id cannot hold control characters (it has "
                              f"{found.group()!r} at position {found.start()})")
    return thread_id


_DIGEST = re.compile(r"[0-9a-f]{64}")


def check_digest(digest: str) -> str:
    """A blob's name: a sha256 as 64 lowercase hex digits, nothing else (it names a file
    in the files store: no path can hide in it). ``NotFound`` for anything else."""
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        raise NotFound(f"no file {str(digest)[:80]!r}: a file is named by its sha256 "
                       "(64 lowercase hex digits)")
    return digest


def parse_schedule_record(name: str, data: str | bytes) -> ScheduleRecord:
    """A stored schedule record (JSON), or ``CorruptStore`` naming the schedule."""
    try:
        return ScheduleRecord.model_validate_json(data)
    except ValueError as exc:
        raise CorruptStore(f"the record of schedule {name!r} cannot be read: {exc}") from exc
