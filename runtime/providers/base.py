"""The one interface a model provider implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..model.attachments.parts import FilePart, Seeing
from ..model.entries import Entry, ToolCall, Usage
from ..model.toolspec import ToolSpec

__all__ = ["ModelRequest", "ModelResponse", "Provider", "TextSink", "seeing"]

TextSink = Callable[[str], Awaitable[None]]
"""Receives text deltas as the model streams them."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a provider needs to produce the next assistant turn."""

    system: str
    entries: Sequence[Entry]
    tools: Sequence[ToolSpec] = ()
    run_id: str = ""
    thread_id: str = ""
    final_turn: bool = False
    """True on the last turn a run may take: no tools are offered."""
    files: Mapping[str, FilePart] = field(default_factory=dict)
    """What the model is shown of each file the entries' messages name, by digest (as
    the provider takes it: ``seeing``); a file missing here is named, not shown."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    stop_reason: str | None = None


def seeing(provider: Provider) -> Seeing:
    """What ``provider`` takes besides text: its ``seeing`` attribute, if it has one (a
    provider without one is shown every file as text)."""
    found = getattr(provider, "seeing", None)
    return found if isinstance(found, Seeing) else Seeing()


class Provider(Protocol):
    """Turns a request into the next assistant turn, streaming text to ``on_text``."""

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse: ...
