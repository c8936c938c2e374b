"""The storage contract every backend implements (and one test suite checks)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Self

from pydantic import TypeAdapter

from ..errors import CorruptStore, InvalidThreadId, NotFound
from ..model.attachments.refs import BlobInfo
from ..model.entries import Entry
from ..model.requests import (
    ControlRequest,
    Instance,
    Lease,
    News,
    Note,
    NoteCall,
    ScheduleRecord,
    SlotMark,
    Vote,
)
from ..model.runs import Delivery, Run, RunState, StreamState, Transition
from .erasure import ThreadEraser
from .tail import Tail

__all__ = ["ENTRIES", "NOTE_CALLS_KEPT", "Accepted", "BlobStore", "Checkpoint", "ControlStore",
           "FeedbackStore", "LeaseStore", "NoteStore", "OutboxStore", "RunStore",
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



class OutboxStore(Protocol):
    """Delivery records (written inside ``RunStore.commit`` checkpoints) and their sending."""

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None,
        thread_id: str | None = None,
    ) -> list[Delivery]:
        """Delivery records, oldest first; ``pending=True``: those with no remote id yet;
        ``thread_id``: those of the thread's runs (quick with ``pending=True``: the records
        not sent yet are indexed)."""

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        """Record that the delivery ``key`` was sent as ``remote_id`` (idempotent)."""

    async def delivery_failed(self, key: str, error: str) -> None:
        """Count a failed send of the delivery ``key`` and keep its error (for a status
        that says why nothing was delivered); nothing if it was sent meanwhile."""

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        """Record how the stream delivery ``key`` stands: its state and the ids of the
        messages it opened; ``finished`` also records it as delivered (``remote_id``: the
        ids, comma-separated). Nothing once it is finished."""

    async def upload_started(self, key: str, upload_id: str) -> None:
        """Record the platform's id for the upload of the file delivery ``key``
        (``FileDelivery.upload_id``), flushed to disk before the upload is completed;
        nothing once it is sent."""



class ControlStore(Protocol):
    """The control plane: requests between processes on one store, and heartbeats."""

    async def add_request(self, request: ControlRequest) -> ControlRequest:
        """Store a request for whichever process serves the store; returns it with its id."""

    async def requests(self) -> list[ControlRequest]:
        """Requests nobody has handled yet, oldest first."""

    async def get_request(self, request_id: int) -> ControlRequest:
        """One request, or ``NotFound``."""

    async def finish_request(self, request: ControlRequest) -> bool:
        """Store the handled request; False if another process handled it first."""

    async def beat(self, instance: Instance, *, gone: bool = False) -> None:
        """Record a serving runtime's heartbeat (``gone``: remove it)."""

    async def instances(self) -> list[Instance]:
        """Every recorded heartbeat."""

    async def listen_requests(self, wake: Callable[[], None]) -> Callable[[], Awaitable[None]]:
        """Call ``wake`` (on the loop) soon after any process adds a request, for as long as
        it can; returns what stops that. A store that cannot tell returns a no-op: its
        readers poll (they poll anyway, as the fallback)."""


class LeaseStore(Protocol):
    """Named leases with an expiry the store's clock judges, so that processes on several
    machines never compare their own clocks: who drives a thread, who is alive, which
    replica holds the Discord gateway."""

    async def take_lease(self, name: str, holder: str, ttl_s: float, *,
                         steal_from: str | None = None) -> str | None:
        """Give ``holder`` the lease for ``ttl_s`` seconds from now, if it is free, expired,
        already its own, or held by ``steal_from`` (a holder known to be dead): None when
        ``holder`` has it now, else the holder that has it."""

    async def renew_leases(self, holder: str, ttl_s: float) -> list[str]:
        """Extend every unexpired lease of ``holder`` to ``ttl_s`` from now; the names it
        still holds, sorted (an expired one may have been taken by another)."""

    async def release_leases(self, holder: str, names: Sequence[str] | None = None) -> None:
        """Give up ``names`` (every lease of ``holder`` when None), if ``holder`` has them."""

    async def leases(self) -> list[Lease]:
        """Every unexpired lease, by name."""

    async def listen_threads(self, heard: Callable[[News, str], None]
                             ) -> Callable[[], Awaitable[None]]:
        """Call ``heard(news, thread_key(thread_id))`` soon after any process ends or pauses
        a run or asks for a thread (``News``); what stops it. A no-op where none can tell."""

    async def ask_for_thread(self, thread_id: str) -> None:
        """Tell the listeners (``asked``) that this process has a run of a held thread."""


class ScheduleStore(Protocol):
    """Schedule records: what the schedules package keeps between restarts (the slot
    claims themselves are runs' idempotency keys)."""

    async def schedule_records(self) -> list[ScheduleRecord]:
        """Every record, by name."""

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Insert or replace records (by name), all in one write: a definition made or
        changed (config, chat, pause, resume). A replaced record's slot bookkeeping is kept
        where it is newer than the new one's (``ScheduleRecord.over``)."""

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        """Move records forward to what fires decided, all in one write, atomically with
        other writers: ``since`` becomes the later of the stored and the mark's, and
        ``last_slot`` with ``last_run_id`` the mark's only if its slot is newer. Nothing
        else of a record changes, and a mark for a record that is not there (deleted)
        writes nothing: a fire from an old copy never undoes another's change."""

    async def delete_schedule(self, name: str) -> bool:
        """Remove a record; False if there was none."""


NOTE_CALLS_KEPT = 1_000
"""The newest calls kept per scope of notes. A call is re-run only when a crash cut it off
before its result was recorded, and the run resumes soon after, so only the last few are
ever asked about; older records go (oldest first) as new calls are recorded."""


class NoteStore(Protocol):
    """The ``memory`` tools' notes, by scope (a thread's, or the agent's), and the calls
    that changed them. A call's idempotency key is looked up in the same write that would
    apply it: a ``remember`` or ``forget`` re-run after a crash changes nothing more, even
    when another thread wrote that key in between."""

    async def notes(self, scope: str) -> list[Note]:
        """The scope's notes, by key."""

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        """Insert or replace the note (by scope and key); False if nothing was written,
        because the call of idempotency key ``call`` is already applied in the scope
        (else it is recorded as applied, in the same write)."""

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        """Remove a note; False if there was none. A ``call`` already applied in the scope
        changes nothing and has the answer it had the first time (else it is recorded as
        applied, with that answer, in the same write)."""

    async def note_calls(self, scope: str) -> list[NoteCall]:
        """The calls recorded in the scope, oldest first (the ``NOTE_CALLS_KEPT`` newest)."""

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        """Record calls as applied, changing no note (``maiden migrate`` copies them so);
        a call already recorded is left as it is."""


class FeedbackStore(Protocol):
    """People's votes on replies (👍 / 👎), one per person per run."""

    async def put_vote(self, vote: Vote) -> bool:
        """Insert the vote, or replace that person's vote on that run; False if nothing
        was written because the stored vote already has this value (a click delivered
        twice keeps its first time)."""

    async def votes(self, *, run_id: str | None = None, since: float | None = None,
                    limit: int | None = None) -> list[Vote]:
        """Votes by time, oldest first (a replaced vote counts from when it was changed):
        those of ``run_id``, or those after ``since``; with ``limit``, the first ``limit``
        of them (a page: the next one starts after the last one's ``at``)."""


class BlobStore(Protocol):
    """Files' bytes, each stored once by its sha256 (``check_digest``): the same bytes put
    again write nothing. A blob is on disk when ``put_blob`` returns, so an entry written
    after it may name it."""

    async def put_blob(self, data: bytes, media_type: str, at: float) -> BlobInfo:
        """Store ``data`` unless it is stored; its record (the first put's, if it was)."""
        ...

    async def get_blob(self, digest: str) -> bytes:
        """The blob's bytes; ``NotFound`` if it is not stored."""
        ...

    async def blob_info(self, digest: str) -> BlobInfo | None:
        ...

    async def blobs(self) -> list[BlobInfo]:
        """Every stored blob's record, oldest first."""
        ...

    async def delete_blobs(self, digests: Sequence[str]) -> int:
        """Remove these blobs (``maiden files prune``); how many there were."""
        ...


class Store(RunStore, OutboxStore, ControlStore, LeaseStore, ScheduleStore, NoteStore,
            FeedbackStore, BlobStore, ThreadEraser, Protocol):
    """What a backend implements: runs and threads, the outbox, the control plane, leases,
    schedule records, notes, votes, files' blobs, and erasing a thread (``erasure``)."""


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
