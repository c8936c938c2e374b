"""What the control plane stores: requests between processes, serving processes' beats,
and the state of schedules."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ControlRequest", "Instance", "ScheduleRecord"]


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
    created_at: float = Field(default_factory=time.time)
