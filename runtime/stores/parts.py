"""The parts of the storage contract besides runs and threads, one protocol each: the
outbox, the control plane, leases, schedule records, notes, memories, votes and blobs.
``base.Store`` is composed of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from ..model.attachments.refs import BlobInfo
from ..model.memories import Cover, Listing, Memory, MemoryCall
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
from ..model.runs import Delivery, StreamState

__all__ = ["MEMORY_CALLS_KEPT", "NOTE_CALLS_KEPT", "BlobStore", "ControlStore",
           "FeedbackStore", "LeaseStore", "MemoryStore", "NoteStore", "OutboxStore",
           "ScheduleStore"]


class OutboxStore(Protocol):
    """Delivery records (written inside ``RunStore.commit`` checkpoints) and their sending."""

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None,
        thread_id: str | None = None,
    ) -> list[Delivery]:
        """Delivery records, each thread's in the order they were written (whatever their
        ``created_at``: a clock may step back); ``pending=True``: those with no remote id
        yet; ``thread_id``: those of the thread's runs (quick with ``pending=True``: the
        records not sent yet are indexed)."""

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        """Record that the delivery ``key`` was sent as ``remote_id`` (idempotent)."""

    async def delivery_failed(self, key: str, error: str) -> None:
        """Count a failed send of the delivery ``key`` and keep its error (for a status
        that says why nothing was delivered), and drop its claim (``claim_delivery``: any
        process may try it again); nothing if it was sent meanwhile."""

    async def claim_delivery(self, key: str, sender: str, at: float, ttl_s: float, *,
                             steal_from: str | None = None) -> Delivery:
        """Claim the delivery ``key`` for ``sender`` (a lease holder's name) just before it is
        sent, in one step: it becomes ``sender``'s unless it was sent, or another process
        claimed it less than ``ttl_s`` ago (by ``at``, the claimant's clock) and is not
        ``steal_from`` (a holder known to be gone). The record as it stands after:
        ``sender`` says whose it is; ``NotFound`` if there is none. So two processes that
        each believe a record theirs to send (one of them stalled past its lease) do not
        both post it: the store, not a process's memory, says who sends."""

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


MEMORY_CALLS_KEPT = 10_000
"""The newest calls that put or deleted memories kept (all scopes together), for the same
reason as ``NOTE_CALLS_KEPT``."""


class MemoryStore(Protocol):
    """Memories (``model.memories``) and the calls that put or deleted them. As for notes, a
    call's idempotency key is looked up in the same write that would apply it, so a call
    re-run after a crash changes nothing more. Who may see a memory is not the store's
    decision: ``search_memories`` narrows by the conversation's ``Cover`` (a coarse filter),
    and the caller applies ``visible`` to what it returns."""

    async def put_memory(self, memory: Memory, call: str | None = None) -> bool:
        """Insert or replace the memory (by id); False if nothing was written, because the
        call of idempotency key ``call`` is already applied (else it is recorded as
        applied, in the same write)."""

    async def get_memory(self, memory_id: str) -> Memory | None:
        """The memory, or None."""

    async def delete_memory(self, memory_id: str, call: str | None = None) -> bool:
        """Remove a memory; False if there was none. A ``call`` already applied changes
        nothing and has the answer it had the first time."""

    async def edit_memory(self, memory_id: str, text: str, by: str, at: float
                          ) -> Memory | None:
        """Change its text, recording who (``edited_by``) and when (``updated_at``); the
        memory as it is now, or None if there is none."""

    async def search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        """At most ``limit`` memories filed under one of ``where.scopes``, confined nowhere
        or to one of ``where.places``, and not expired at ``where.at``: those holding any
        word of ``query``, the best matches first (then the newest), or, for a query with
        no words, the most recently updated."""

    async def list_memories(self, listing: Listing, limit: int) -> list[Memory]:
        """At most ``limit`` memories that ``listing`` keeps (``model.memories.listed``, and
        holding any word of its query when it has words), the most recently updated first:
        a list for people who look after them, not a conversation's recall."""

    async def memories_of_thread(self, thread_id: str) -> list[Memory]:
        """The memories a thread sourced (learned in it) or that are kept for it (its
        thread scope), oldest first: what erasing the thread removes with it."""

    async def erase_person(self, user: str) -> int:
        """Remove every memory ``user`` (``slack:U123``) said (its provenance's user) or
        that is about them (their person scope), with the calls that put them (as erasing
        a thread does); how many memories went. One durable write (the files store, whose
        memories are a file each: each removal durable, and asked again it finishes)."""

    async def memory_calls(self) -> list[MemoryCall]:
        """The calls recorded, oldest first (the ``MEMORY_CALLS_KEPT`` newest): what
        ``maiden migrate`` copies so that a call re-run in the new store changes nothing."""

    async def save_memory_calls(self, calls: Sequence[MemoryCall]) -> None:
        """Record calls (``maiden migrate``); those already recorded are left as they are."""


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

