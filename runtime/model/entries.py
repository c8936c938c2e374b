"""A thread's history: a tagged union of entries, serialised through one adapter."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .attachments.refs import FileRef

__all__ = [
    "ENTRY",
    "LATE_RESULT",
    "RESUMED_LATE",
    "RUN_FAILED",
    "SUMMARY",
    "AssistantTurn",
    "Entry",
    "Notice",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UserMessage",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Usage(_Model):
    """Tokens spent on one model response (or summed over a run)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        # The counts that are not 0 only: a run's row keeps the fields set (``run_json``).
        sums = {"input_tokens": self.input_tokens + other.input_tokens,
                "output_tokens": self.output_tokens + other.output_tokens,
                "cache_creation_tokens": self.cache_creation_tokens
                + other.cache_creation_tokens,
                "cache_read_tokens": self.cache_read_tokens + other.cache_read_tokens}
        return Usage(**{name: count for name, count in sums.items() if count})

    @property
    def prompt_tokens(self) -> int:
        """What the model read: input, cache reads and cache writes."""
        return self.input_tokens + self.cache_creation_tokens + self.cache_read_tokens

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.output_tokens
                + self.cache_creation_tokens + self.cache_read_tokens)


class ToolCall(_Model):
    """One call the model asked for. ``arguments`` is whatever the model sent:
    normally a JSON object, but kept as-is when it is not, so validation can
    answer with an ``invalid_arguments`` result instead of crashing."""

    id: str
    name: str
    arguments: Any = Field(default_factory=dict)


class UserMessage(_Model):
    kind: Literal["user"] = "user"
    run_id: str
    text: str
    user: str | None = None
    at: float = Field(default_factory=time.time)
    files: tuple[FileRef, ...] = ()
    """The files the message carried, as stored (those refused are not here: a notice
    after the message says why)."""


class AssistantTurn(_Model):
    kind: Literal["assistant"] = "assistant"
    run_id: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    at: float = Field(default_factory=time.time)


class ToolResult(_Model):
    kind: Literal["tool_result"] = "tool_result"
    run_id: str
    tool_call_id: str
    name: str
    content: Any = None
    is_error: bool = False
    at: float = Field(default_factory=time.time)
    files: tuple[FileRef, ...] = ()
    """Files the tool handed back, as stored: sent with the run's answer."""
    images: tuple[FileRef, ...] = ()
    """Images the tool showed the model, as stored: sent to the model with the result."""


class Notice(_Model):
    """Something the runtime tells the model (and the reader), e.g. the final-turn notice."""

    kind: Literal["notice"] = "notice"
    run_id: str
    code: str
    text: str
    at: float = Field(default_factory=time.time)
    covers: int | None = None
    """A ``summary``: how many of the thread's entries (summaries aside) it stands for."""


RUN_FAILED = "run_failed"
"""The code of the ``Notice`` that closes a failed run's part of its thread: the model sees
it as its own turn, so the next message is a new user turn, never joined to the failed
run's message (and a request that ends with it leaves it out: the run was resumed)."""


SUMMARY = "summary"
"""The code of a ``Notice`` that summarises the start of a thread (``covers`` entries)."""

LATE_RESULT = "late_result"
"""The code of the notice ``model_view`` leaves where a late result came."""

RESUMED_LATE = "resumed_late"
"""The code of the notice a run leaves in its thread when it is taken up again (resumed)
after the thread went on without it: it names the message the run answers."""


Entry = Annotated[UserMessage | AssistantTurn | ToolResult | Notice, Field(discriminator="kind")]

ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)
"""The one adapter entries are (de)serialised through."""
