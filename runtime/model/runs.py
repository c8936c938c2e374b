"""Runs, their states and the one function that moves them between states (what a run
puts in the outbox is ``deliveries.py``'s)."""

from __future__ import annotations

import hashlib
import secrets
import time
from enum import StrEnum
from typing import Any, Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from ..errors import IllegalTransition
from .attachments.refs import FileRef, FileSource
from .deliveries import (
    DELIVERY,
    NOT_POSTED,
    ApprovalDelivery,
    Delivery,
    FileDelivery,
    ReplyDelivery,
    StreamDelivery,
    StreamState,
)
from .entries import Usage
from .jobs import Job

__all__ = [
    "ARRIVAL_STEP_S",
    "DELIVERY",
    "NOT_POSTED",
    "TERMINAL",
    "ApprovalDelivery",
    "Decision",
    "Delivery",
    "FileDelivery",
    "Origin",
    "PendingApproval",
    "ReplyDelivery",
    "Run",
    "RunChanges",
    "RunState",
    "Said",
    "StreamDelivery",
    "StreamState",
    "Transition",
    "arriving_after",
    "changed",
    "idempotency_key",
    "new_run_id",
    "transition",
]


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_TOOL = "awaiting_tool"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


S = RunState
_ALLOWED: dict[RunState, frozenset[RunState]] = {
    S.QUEUED: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    # running -> running is a recovery: the same run picked up again after a crash.
    S.RUNNING: frozenset({S.RUNNING, S.AWAITING_TOOL, S.AWAITING_APPROVAL, S.COMPLETED,
                          S.FAILED, S.CANCELLED, S.TIMED_OUT}),
    S.AWAITING_TOOL: frozenset({S.RUNNING, S.AWAITING_APPROVAL, S.FAILED, S.CANCELLED,
                                S.TIMED_OUT}),
    S.AWAITING_APPROVAL: frozenset({S.RUNNING, S.AWAITING_TOOL, S.FAILED, S.CANCELLED,
                                    S.TIMED_OUT}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED}),
    S.TIMED_OUT: frozenset({S.QUEUED}),
}

TERMINAL = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED, S.TIMED_OUT})
"""States a run stays in until someone resumes it explicitly."""

DRIVABLE = (S.QUEUED, S.RUNNING, S.AWAITING_TOOL)
"""States of a run that a process drives on (or takes up after a crash)."""


class Origin(BaseModel):
    """Where a message came from, and so where its reply goes.

    ``channel`` names a channel's deliverer (``"slack"``, ``"discord"``);
    ``"cli"`` and ``"http"`` reply to their caller directly and need none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str = "cli"
    target: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    user_name: str | None = None
    """The sender's name as the platform shows it (Slack's display name, Discord's), when
    the channel knows it: what a memory's source says instead of the bare id."""
    place: tuple[str, ...] = ()
    """The ids of the place it came from, most specific first (a Slack channel; a Discord
    channel, its parent channel, its guild): what routes and spend caps look at."""
    direct: bool = False
    """A direct message with the bot."""
    private: bool = False
    """A DM or a private channel (Slack's ``im``, ``mpim`` and private channels; a Discord
    channel ``@everyone`` cannot view, a private thread): what is learned here is recalled
    nowhere else (``model.memories.visible``)."""
    rights: tuple[str, ...] = ()
    """The rights (``talk``, ``approve``, ``operate``) the sender holds here, as the channel's
    access rules (or the HTTP token, or the operator's CLI) granted them at submit time:
    never a request body's word. What a memory may be written to reads it."""


TARGET_FORMS = '"slack:CHANNEL", "slack:CHANNEL:THREAD_TS" or "discord:CHANNEL" (a numeric id)'


def parse_target(text: str) -> Origin:
    """A channel target as people write it (``slack:C0123``, ``slack:C0123:171.2``,
    ``discord:123``) as the origin a message to it carries; ``ValueError`` if it is none."""
    kind, _, rest = text.partition(":")
    parts = rest.split(":") if rest else []
    if kind == "slack" and len(parts) in (1, 2) and all(p.strip() for p in parts):
        target = {"channel": parts[0], **({"thread_ts": parts[1]} if len(parts) == 2 else {})}
        return Origin(channel="slack", target=target)
    if kind == "discord" and len(parts) == 1 and parts[0].isdigit():
        return Origin(channel="discord", target={"channel": parts[0]})
    raise ValueError(f"{text!r} is not a target: use {TARGET_FORMS}")


class Said(BaseModel):
    """One earlier message of a conversation a client brings along (the OpenAI wire's
    resent history): written into the thread before the run's own message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant"]
    text: str


class PendingApproval(BaseModel):
    """A tool call waiting for a person: bound to the exact call by its arguments' hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_call_id: str
    name: str
    arguments: Any = None
    arguments_hash: str
    reason: str
    """``requires_approval`` or ``uncertain_side_effect``."""
    requested_at: float
    asked_by: str | None = None
    channel: str = "cli"
    target: dict[str, str] = Field(default_factory=dict)
    """Where to ask: the channel and target the run's message came from."""


class Decision(BaseModel):
    """A person's answer to a pending approval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_call_id: str
    approve: bool
    by: str
    reason: str = ""
    arguments_hash: str
    at: float
    consumed: bool = False
    """Set when a non_idempotent call starts on the strength of this decision: one
    approval lets the effect happen once, and a crash after that asks again."""


def new_run_id(now: float) -> str:
    """32 hex digits: the time in milliseconds, then 80 random bits. Ordered by time, so a new
    run's rows go at the end of every index on run ids rather than anywhere in them."""
    return f"{int(now * 1000):012x}{secrets.token_hex(10)}"


class Run(BaseModel):
    """One inbound message and everything the agent did to answer it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    thread_id: str
    state: RunState = S.QUEUED
    reason: str = "received"
    text: str
    origin: Origin = Field(default_factory=Origin)
    idempotency_key: str | None = None
    agent: str = ""
    """The agent that answers it: its thread's (a thread keeps the agent of its first run);
    empty in runs stored before there were several agents (the default agent's)."""
    files: tuple[FileRef, ...] = ()
    """Files the message carried that were stored when it was taken (HTTP, the CLI)."""
    fetch: tuple[FileSource, ...] = ()
    """Files a platform announced with it, fetched and stored as the run's first step."""
    context: tuple[Said, ...] = ()
    """Earlier messages the sender brought (a new thread seeded with a conversation held
    elsewhere): written before the message when the run starts."""
    job: Job | None = None
    """Its first steps fixed, not the model's: a reminder's words, a scheduled check's
    tool call (``jobs.py``)."""
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    version: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    started_at: float | None = None
    turns: int = 0
    tool_calls: int = 0
    recovery_attempts: int = 0
    """How often the run was picked up after its process died."""
    stalled_recoveries: int = 0
    """Recoveries in a row without the thread moving on: the poison-run counter."""
    recovered_at: int | None = None
    """The thread's length at the last recovery."""
    first_entry: int | None = None
    """Where the run's message is in its thread (set when it starts): a tail loaded from
    there holds all of the run's entries."""
    started_calls: tuple[str, ...] = ()
    """non_idempotent calls begun and not yet recorded: the crash-uncertain ones."""
    reply: str | None = None
    reply_files: tuple[FileRef, ...] = ()
    """Files its tools handed back, sent with the reply (HTTP: ``GET /v1/files/...``)."""
    error: str | None = None
    owner: str | None = None
    """The runtime instance that last started driving this run."""
    pending_approval: PendingApproval | None = None
    decisions: tuple[Decision, ...] = ()
    trace: str = ""
    """The W3C ``traceparent`` every stretch of this run is traced under (``[otel]``): the
    request's that brought it, else its first stretch's own span; empty when untraced."""

    def decision_for(self, tool_call_id: str) -> Decision | None:
        """The standing (unconsumed) decision on a call, if any."""
        return next((d for d in reversed(self.decisions)
                     if d.tool_call_id == tool_call_id and not d.consumed), None)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


class Transition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    source: RunState
    target: RunState
    reason: str
    at: float


class RunChanges(TypedDict, total=False):
    """The fields of a ``Run`` a checkpoint may change besides its state and reason (a
    misspelt name is a type error, not a silently dropped change)."""

    version: int
    usage: Usage
    cost_usd: float
    started_at: float | None
    turns: int
    tool_calls: int
    recovery_attempts: int
    stalled_recoveries: int
    recovered_at: int | None
    first_entry: int | None
    started_calls: tuple[str, ...]
    reply: str | None
    reply_files: tuple[FileRef, ...]
    error: str | None
    owner: str | None
    pending_approval: PendingApproval | None
    decisions: tuple[Decision, ...]
    trace: str


_CHANGEABLE = frozenset(RunChanges.__annotations__)


def _checked(changes: RunChanges) -> RunChanges:
    # Also at run time: callers that build the dict dynamically.
    if changes and not _CHANGEABLE.issuperset(changes):
        unknown = sorted(set(changes) - _CHANGEABLE)
        raise TypeError(f"not a field a checkpoint may change: {', '.join(unknown)}")
    return changes


_new, _set = object.__new__, object.__setattr__


def _updated(run: Run, update: dict[str, Any]) -> Run:
    """``run.model_copy(update=update)``, made directly: pydantic's copies each of a model's
    dicts through ``copy.copy`` and looks for extra and private fields, of which a ``Run``
    has none (``extra="forbid"``). The same run, fields set and all (a test holds them
    equal), in a third less time: a checkpoint makes one or two."""
    moved = _new(Run)
    values = run.__dict__.copy()
    values.update(update)
    _set(moved, "__dict__", values)
    _set(moved, "__pydantic_fields_set__", run.__pydantic_fields_set__ | update.keys())
    _set(moved, "__pydantic_extra__", None)
    _set(moved, "__pydantic_private__", None)
    return moved


def changed(run: Run, now: float, **changes: Unpack[RunChanges]) -> Run:
    """``run`` with ``changes`` applied (its state unchanged)."""
    return _updated(run, {**_checked(changes), "updated_at": now})


def transition(
    run: Run, target: RunState, reason: str, *, now: float | None = None,
    **changes: Unpack[RunChanges],
) -> tuple[Run, Transition]:
    """Move ``run`` to ``target``; raise ``IllegalTransition`` if the state machine forbids it."""
    if target not in _ALLOWED[run.state]:
        raise IllegalTransition(run.id, run.state, target)
    at = time.time() if now is None else now
    moved = _updated(run, {**_checked(changes), "state": target, "reason": reason,
                           "updated_at": at})
    return moved, Transition(run_id=run.id, source=run.state, target=target, reason=reason, at=at)


def idempotency_key(run_id: str, tool_call_id: str) -> str:
    """sha256(run_id + tool_call_id): what a tool or a channel uses to make a retried effect
    happen once. Run ids have a fixed length, so plain concatenation is unambiguous."""
    return hashlib.sha256((run_id + tool_call_id).encode()).hexdigest()


ARRIVAL_STEP_S = 1e-6
"""How much later than its thread's latest arrival a run is stamped when its own clock says
earlier: strictly after, so that its stamp alone orders it (its outbox records are sent in
that order)."""


def arriving_after(run: Run, newest: float | None) -> Run:
    """``run``, stamped after ``newest`` (the latest arrival in its thread), so that a
    thread's runs are in the order they arrived even when the replica that took this one
    has a clock behind the others'."""
    if newest is None or newest <= run.created_at:
        return run
    stamp = newest + ARRIVAL_STEP_S
    return run.model_copy(update={"created_at": stamp,
                                  "updated_at": max(run.updated_at, stamp)})
