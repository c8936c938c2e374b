"""What the control plane stores: requests between processes, and serving processes' beats."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ControlRequest", "Instance"]


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
