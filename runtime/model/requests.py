"""What the control plane stores: requests between processes, serving processes' beats,
leases, and the state of schedules."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .runs import Run

__all__ = ["SKIPS_KEPT", "ControlRequest", "Instance", "Lease", "News", "Note", "NoteCall",
           "ScheduleRecord", "ScheduleService", "SlotMark", "Vote", "kept_skips", "thread_key"]


class ControlRequest(BaseModel):
    """A decision, cancel or resume asked of whichever process serves the store."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int = 0
    """Assigned by the store, increasing."""
    kind: Literal["decide", "cancel", "resume"]
    run_id: str
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)
    handled_at: float | None = None
    handled_by: str | None = None
    ok: bool | None = None
    result: str | None = None
    error: str | None = None
    """The machine-readable reason of a refusal (``RunError.reason``)."""


class Instance(BaseModel):
    """A serving runtime's heartbeat."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    pid: int
    host: str
    started_at: float
    beat_at: float


class Lease(BaseModel):
    """A named lease (``thread:{id}``, ``instance:{id}``, ``discord:gateway``) that one
    holder has until it expires, by the store's clock (the database server's, for a store
    several machines share): nobody else can take it before then."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    holder: str
    expires_in: float
    """Seconds left when it was read."""


News = Literal["ended", "asked"]
"""What one process tells the others of a thread (``LeaseStore.listen_threads``): one of its
runs ended or paused (its waiters in other processes look at the store), or a process found
the thread's lease held while it has a run of the thread to drive (the holder drives it now
instead of keeping the lease idle)."""


def thread_key(thread_id: str) -> str:
    """A thread's name in news between processes: short, plain ASCII and of one length
    (an id may be of any length and hold any character)."""
    return hashlib.sha256(thread_id.encode()).hexdigest()[:24]


class ScheduleRecord(BaseModel):
    """What the store keeps of a schedule between restarts. The runtime does not read it:
    ``spec`` is the definition of a schedule created from chat, in the schedules package's
    own terms. Keyed by ``name``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    origin: Literal["config", "chat"]
    spec: dict[str, Any] = Field(default_factory=dict)
    created_by: str | None = None
    """The thread a chat schedule was created in."""
    request_key: str | None = None
    """The idempotency key of the tool call that created it (a retried call finds it)."""
    paused: bool = False
    since: float
    """Every slot at or before this instant has been decided (run or given up): missed
    slots are counted from the later of this and ``last_slot``."""
    last_slot: float | None = None
    last_run_id: str | None = None
    skipped_slot: float | None = None
    """The newest slot not run because the run before it waited for an approval
    (``overlap``)."""
    skipped_why: str | None = None
    skips: tuple[tuple[float, str], ...] = ()
    """The newest slots decided not to run (at most ``SKIPS_KEPT``), oldest first, each
    with why: held back (``overlap``, a slot that cannot run), or missed while maiden was
    down and not run by ``misfire``."""
    created_at: float = Field(default_factory=time.time)

    def over(self, stored: ScheduleRecord | None) -> ScheduleRecord:
        """This record, saved over ``stored``: its definition and pause as they are, its
        slot bookkeeping no older than the stored one's (a pause read before another
        replica's fire does not take that fire back)."""
        if stored is None:
            return self
        return SlotMark(name=self.name, since=stored.since, last_slot=stored.last_slot,
                        last_run_id=stored.last_run_id, skipped_slot=stored.skipped_slot,
                        skipped_why=stored.skipped_why, skips=stored.skips).applied(self)


class SlotMark(BaseModel):
    """How far a fire of the schedule ``name`` decided its slots: the only change a fire
    makes to a record (``ScheduleStore.advance_schedules``), so a replica firing from an
    old copy of the record never undoes a pause, a resume or a delete made since."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    since: float
    last_slot: float | None = None
    last_run_id: str | None = None
    skipped_slot: float | None = None
    skipped_why: str | None = None
    skips: tuple[tuple[float, str], ...] = ()
    """The slots this fire decided not to run, with why (``ScheduleRecord.skips``)."""

    def applied(self, record: ScheduleRecord) -> ScheduleRecord:
        """``record`` moved forward to this mark, never back: the later ``since``, and this
        ``last_slot`` and ``last_run_id`` if the slot is newer, the same for the skipped
        slot and why; everything else as it is."""
        update: dict[str, Any] = {}
        if self.since > record.since:
            update["since"] = self.since
        if self.last_slot is not None and (record.last_slot is None
                                           or self.last_slot > record.last_slot):
            update |= {"last_slot": self.last_slot, "last_run_id": self.last_run_id}
        if self.skipped_slot is not None and (record.skipped_slot is None
                                              or self.skipped_slot > record.skipped_slot):
            update |= {"skipped_slot": self.skipped_slot, "skipped_why": self.skipped_why}
        if self.skips and (skips := kept_skips(record.skips, self.skips)) != record.skips:
            update["skips"] = skips
        return record.model_copy(update=update) if update else record


SKIPS_KEPT = 50
"""How many skipped slots a schedule's record keeps, with why (its history shows them)."""


def kept_skips(*lists: tuple[tuple[float, str], ...]) -> tuple[tuple[float, str], ...]:
    """The skips of ``lists`` as one: each slot once (the first reason given for it), oldest
    first, the newest ``SKIPS_KEPT``."""
    merged: dict[float, str] = {}
    for skips in lists:
        for slot, why in skips:
            merged.setdefault(slot, why)
    return tuple(sorted(merged.items()))[-SKIPS_KEPT:]


class Note(BaseModel):
    """A note the ``memory`` tools keep: ``scope`` is ``thread:{id}`` or ``agent``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str
    key: str
    text: str
    updated_at: float = Field(default_factory=time.time)
    written_by: str | None = None
    """The idempotency key of the tool call that last wrote it (None: written outside a
    call, or before maiden kept it)."""


class NoteCall(BaseModel):
    """A ``remember`` or ``forget`` call applied to a scope's notes, by its idempotency key:
    kept so that the call, re-run after a crash, changes nothing more."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str
    call: str
    """The call's idempotency key."""
    key: str
    """The note's key."""
    forget: bool = False
    """A ``forget`` (else a ``remember``)."""
    existed: bool = False
    """For a ``forget``: whether there was a note to remove (what a re-run answers)."""


class Vote(BaseModel):
    """A person's 👍 or 👎 on a run's reply: one per person per run (a change of mind
    replaces it). ``user`` is the platform's id of whoever clicked, as the platform told."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    user: str
    value: Literal["up", "down"]
    at: float = Field(default_factory=time.time)
    thread_id: str
    channel: str
    """The platform it came from (``slack``, ``discord``): the run's own channel."""
    place: str | None = None
    """Where the reply is (a Slack or Discord channel id)."""
    message: str | None = None
    """The reply's message id on the platform (the one whose buttons were clicked)."""


class ScheduleService(Protocol):
    """What a process that fires schedules offers the channels (the app hands its
    scheduler to the HTTP API, which lists them and runs one by hand)."""

    async def listing(self) -> list[dict[str, Any]]:
        """Each schedule as JSON: its definition, next fires, last slot and outcome."""
        ...

    async def run_now(self, name: str, *, request: str | None = None) -> Run:
        """Submit one run of the schedule now, under its own key; ``NotFound`` if there is
        no schedule of that name. ``request``: the identity of the asking (a chat command's
        invocation): the same request again is the same run."""
        ...

    async def hook(self, name: str, body: bytes, headers: Mapping[str, str]
                   ) -> tuple[Run, bool]:
        """Take a webhook's delivery (``POST /v1/hooks/{name}``): ``HookRefused`` when its
        signature is not valid or its body too big, ``NotFound`` when there is no such
        hook; else its run, and whether a delivery sent before made it (nothing more is
        run: the sender's delivery id is the run's key)."""
        ...

    async def set_paused(self, name: str, paused: bool) -> None:
        """Pause or resume a schedule (any: this is the operator, not a chat); ``NotFound``
        if there is no schedule of that name."""
        ...

    async def history(self, name: str, limit: int = 20) -> list[dict[str, Any]]:
        """The schedule's newest ``limit`` slots, newest first, as JSON: the slot, and its
        run's id, state, outcome (delivered where, as which message, or the error), or
        ``null`` for a slot that has no run (missed, skipped, or paused); ``NotFound`` if
        there is no schedule of that name."""
        ...
