"""The HTTP API's wire format: settings, request bodies and responses (pydantic, no FastAPI)."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime import (
    TERMINAL,
    Decision,
    Entry,
    FileRef,
    Memory,
    Origin,
    Run,
    RunState,
    ThreadInfo,
    Transition,
    Usage,
    Vote,
    source_words,
)

__all__ = [
    "ApprovalIn",
    "ApprovalOut",
    "CancelIn",
    "EntryPage",
    "FeedbackPage",
    "FileIn",
    "FileOut",
    "Health",
    "MemoryEditIn",
    "MemoryForgotten",
    "MemoryOut",
    "MemoryPage",
    "MessageIn",
    "Problem",
    "RunDetail",
    "RunOut",
    "RunPage",
    "ThreadDetail",
    "ThreadOut",
    "ThreadPage",
    "message_model",
]


def _utf8(value: str | None) -> str | None:
    # JSON may carry lone surrogates ("\ud800"); no store can keep them.
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"not valid Unicode: {exc.reason}") from None
    return value


class _In(BaseModel):
    # Strict: JSON's 0 is not false, "5" is not a number; the schema says what is accepted.
    model_config = ConfigDict(extra="forbid", strict=True)


class FileIn(_In):
    """A file sent with a message, its bytes in base64 (or a part of a multipart body)."""

    name: str = Field(min_length=1, max_length=255, description="the file's name")
    media_type: str | None = Field(default=None, max_length=255, description=(
        "its media type (default: from the name; checked against the bytes)"))
    data: str = Field(description="the file's bytes, base64 (standard alphabet, padded)")

    _check = field_validator("name", "media_type")(_utf8)


class MessageIn(_In):
    """A message to the agent on a thread."""

    text: str = Field(min_length=1, description="the message")
    files: list[FileIn] = Field(default_factory=list, description=(
        "files the agent is to read ([files] limits apply; see also multipart/form-data)"))
    user: str | None = Field(default=None, max_length=200, description=(
        "who sends it: may only name the caller (the token's name, or 'local' without tokens)"))
    wait: bool = Field(default=True, description="answer once the run ends or pauses "
                       "(false: answer 202 at once with the run id)")

    _check = field_validator("text", "user")(_utf8)


_MessageIn = MessageIn


def message_model(max_chars: int) -> type[MessageIn]:
    """``MessageIn`` with the configured length limit, so the schema states it."""

    class MessageIn(_MessageIn):
        text: str = Field(min_length=1, max_length=max_chars, description="the message")

    return MessageIn


class ApprovalIn(_In):
    approve: bool = Field(description="true runs the call, false denies it")
    by: str = Field(default="", max_length=200, description=(
        "who decides: may only name the caller (the token's name, or 'local' without tokens)"))
    reason: str = Field(default="", max_length=2000)
    arguments_hash: str | None = Field(
        default=None, max_length=200,
        description="the hash of the arguments the person saw; a different call is refused")
    wait: bool = Field(default=False, description="answer once the run ends or pauses again")

    _check = field_validator("by", "reason", "arguments_hash")(_utf8)


class CancelIn(_In):
    by: str = Field(default="", max_length=200, description=(
        "who cancels: may only name the caller (the token's name, or 'local' without tokens)"))

    _check = field_validator("by")(_utf8)


class Problem(BaseModel):
    """An error, as RFC 9457 ``application/problem+json``."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    code: str | None = Field(default=None, description="a stable machine-readable reason")
    errors: list[dict[str, Any]] | None = Field(default=None,
                                                description="each invalid field and why")


class ApprovalOut(BaseModel):
    """A tool call waiting for a person: decide it at ``.../approvals/{tool_call_id}``."""

    tool_call_id: str
    name: str
    arguments: Any = None
    arguments_hash: str
    reason: str
    requested_at: float


class FileOut(BaseModel):
    """A file that came with a reply (a tool made it): where to download it."""

    name: str
    media_type: str
    size: int
    digest: str
    url: str = Field(description="GET it with the same token: /v1/files/{digest}?name=...")

    @classmethod
    def of(cls, ref: FileRef) -> FileOut:
        return cls(name=ref.name, media_type=ref.media_type, size=ref.size, digest=ref.digest,
                   url=f"/v1/files/{ref.digest}?{urlencode({'name': ref.name})}")


class RunOut(BaseModel):
    """Where a run stands: its reply once it completed, or what it waits for."""

    thread_id: str
    run_id: str
    state: RunState
    reason: str
    reply: str | None = None
    error: str | None = None
    usage: Usage
    cost_usd: float
    approval: ApprovalOut | None = None
    files: list[FileOut] = Field(default_factory=list,
                                 description="files sent with the reply (a tool made them)")

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(**_run_fields(run))


class RunDetail(RunOut):
    """A run with its message, counters and history of states and decisions."""

    text: str
    origin: Origin
    agent: str = Field(description="the agent that answers it (its thread's); empty: the "
                       "default agent (a run from before there were several)")
    created_at: float
    updated_at: float
    started_at: float | None = None
    turns: int
    tool_calls: int
    recovery_attempts: int
    terminal: bool
    transitions: list[Transition] | None = Field(
        description="every state change with its reason (null in lists: get the run)")
    decisions: list[Decision]

    @classmethod
    def detail(cls, run: Run, transitions: list[Transition] | None) -> RunDetail:
        return cls(**_run_fields(run), text=run.text, origin=run.origin, agent=run.agent,
                   created_at=run.created_at, updated_at=run.updated_at,
                   started_at=run.started_at, turns=run.turns, tool_calls=run.tool_calls,
                   recovery_attempts=run.recovery_attempts, terminal=run.state in TERMINAL,
                   transitions=transitions, decisions=list(run.decisions))


def _run_fields(run: Run) -> dict[str, Any]:
    pending = run.pending_approval
    approval = None if pending is None else ApprovalOut(
        tool_call_id=pending.tool_call_id, name=pending.name, arguments=pending.arguments,
        arguments_hash=pending.arguments_hash, reason=pending.reason,
        requested_at=pending.requested_at)
    return {"thread_id": run.thread_id, "run_id": run.id, "state": run.state,
            "reason": run.reason, "reply": run.reply, "error": run.error, "usage": run.usage,
            "cost_usd": run.cost_usd, "approval": approval,
            "files": [FileOut.of(f) for f in run.reply_files]}


class ScheduleRunOut(BaseModel):
    """The run of a schedule's last slot."""

    id: str
    thread_id: str
    state: RunState
    error: str | None = None
    delivered: list[str] | None = Field(
        default=None, description="the channel's message ids of the delivered answer")


class SkippedSlotOut(BaseModel):
    """The newest slot not run because the run before it still waited for an approval."""

    slot: str = Field(description="ISO 8601 in the schedule's timezone")
    why: str | None


class ScheduleOut(BaseModel):
    """A schedule: its definition, next fires and what its last slot did."""

    name: str
    origin: Literal["config", "chat"]
    cron: str | None = Field(description="the crontab line; null for a one-shot (at)")
    at: str | None = Field(default=None, description="a one-shot's time, ISO 8601 in its "
                           "timezone; null for a recurring schedule")
    done: bool = Field(default=False, description="a one-shot that ran (or was skipped): "
                       "kept, never fired again")
    does: Literal["prompt", "say", "tool"] = Field(
        default="prompt", description="what a slot does: ask the agent (prompt), post fixed "
        "words (say) or run a tool (tool), the last two without the model")
    timezone: str
    thread: str
    fresh_thread: bool
    deliver: str | None = Field(description="slack:CHANNEL[:THREAD_TS], discord:CHANNEL, "
                                "or null: the answer stays in the thread")
    misfire: Literal["skip", "once", "all"]
    overlap: Literal["skip", "queue"] = Field(
        default="skip", description="skip: a slot whose previous run still waits for an "
        "approval is skipped (see skipped); queue: its run waits behind it")
    enabled: bool
    paused: bool
    next_fires: list[str] = Field(description="ISO 8601 in the schedule's timezone")
    last_slot: str | None
    last_run: ScheduleRunOut | None
    outcome: str = Field(description="the last run's state, and where its answer was "
                         "delivered (or that it was not yet)")
    skipped: SkippedSlotOut | None = Field(
        default=None, description="the newest slot skipped while the previous run waited "
        "for an approval (overlap = skip), and why")


class SchedulePage(BaseModel):
    schedules: list[ScheduleOut]


class SlotOut(BaseModel):
    """One slot of a schedule and what became of it."""

    slot: str = Field(description="ISO 8601 in the schedule's timezone")
    run: ScheduleRunOut | None = Field(description="null: no run claimed the slot (missed, "
                                       "skipped by the misfire or overlap policy, or "
                                       "paused)")
    outcome: str


class SlotHistory(BaseModel):
    name: str
    slots: list[SlotOut] = Field(description="newest first")


class RunPage(BaseModel):
    runs: list[RunDetail] = Field(description="newest first")
    next_offset: int | None = Field(description="pass as ?offset= for the next page")


class MemoryEditIn(_In):
    """A memory's corrected text."""

    text: str = Field(min_length=1, max_length=2000, description="what it says now")

    _check = field_validator("text")(_utf8)


class MemoryOut(Memory):
    """A memory, with who said it, where and when in a few words (``source``)."""

    source: str = Field(description="who said it, where, when (as the agent is shown it)")

    @classmethod
    def of(cls, memory: Memory) -> MemoryOut:
        return cls(**dict(memory), source=source_words(memory))


class MemoryPage(BaseModel):
    memories: list[MemoryOut] = Field(description="the most recently changed first")


class MemoryForgotten(BaseModel):
    id: str
    existed: bool = Field(description="false: it was forgotten meanwhile")


class PersonForgotten(BaseModel):
    person: str
    memories: int = Field(description="how many memories went: those the person said and "
                                      "those about them (0: none, or forgotten already)")


class FeedbackPage(BaseModel):
    votes: list[Vote] = Field(description="oldest first, by when each was given or last "
                                          "changed; one per person per run")
    next_since: float | None = Field(description="pass as ?since= for the next page")


class ThreadOut(BaseModel):
    thread_id: str
    entries: int
    runs: int
    last_state: RunState | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, info: ThreadInfo) -> ThreadOut:
        return cls(thread_id=info.id, entries=info.length, runs=info.runs,
                   last_state=info.last_state, created_at=info.created_at,
                   updated_at=info.updated_at)


class ThreadPage(BaseModel):
    threads: list[ThreadOut] = Field(description="most recently updated first")
    total: int
    next_offset: int | None


class EntryPage(BaseModel):
    items: list[Entry] = Field(description="oldest first")
    total: int
    offset: int
    next_offset: int | None


class ThreadDetail(BaseModel):
    thread_id: str
    entries: EntryPage
    runs: list[RunOut] = Field(description="the newest runs_limit runs, oldest first")
    runs_total: int


class Health(BaseModel):
    status: str = Field(description="ok, or unavailable")
    version: str = Field(description="the maiden version serving (as `maiden --version`)")
    store: str
    runtime: str
    detail: str | None = None
    channels: dict[str, str] = Field(
        default_factory=dict, description="each channel's state, e.g. \"slack\": "
        "\"connecting: <reason>\" while Slack cannot be reached (it does not make maiden "
        "unavailable: the other channels serve, and its replies wait in the outbox)")
