"""A provider that replays a script of turns: for tests, demos and crash drills.

The turn it plays is chosen by how many assistant turns the thread already has,
so a restarted process picks the script up exactly where the thread stands.
Running past the end raises ``ScriptExhausted``; ``assert_complete()`` fails
while some turn was never played.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ..errors import ConfigError, ProviderError, ScriptExhausted
from ..model.entries import AssistantTurn, ToolCall, Usage
from .base import ModelRequest, ModelResponse, TextSink

__all__ = ["ScriptedCall", "ScriptedProvider", "ScriptedTurn"]


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: Any = Field(default_factory=dict)
    id: str | None = None


class ScriptedTurn(BaseModel):
    """One step: a text and/or tool calls, or an ``error`` the provider raises."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    usage: Usage = Usage(input_tokens=10, output_tokens=5)
    delay_s: float = 0.0
    error: str | None = None
    chunks: int = Field(default=1, ge=1)
    """The text is streamed in this many pieces (as a model streams deltas)..."""
    chunk_delay_s: float = 0.0
    """...with this pause before each piece after the first."""


_SCRIPT: TypeAdapter[list[ScriptedTurn]] = TypeAdapter(list[ScriptedTurn])


class ScriptedProvider:
    """Replays ``turns``; records every request in ``calls``."""

    model = "scripted"

    def __init__(self, turns: Sequence[ScriptedTurn | dict[str, Any]]) -> None:
        self.turns = [t if isinstance(t, ScriptedTurn) else ScriptedTurn.model_validate(t)
                      for t in turns]
        self.calls: list[ModelRequest] = []
        self.played: set[int] = set()

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedProvider:
        """Load a JSON script: a list of turns, or ``{"turns": [...]}``."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if isinstance(data, dict):
                data = data.get("turns")
            return cls(_SCRIPT.validate_python(data))
        except (OSError, ValueError) as exc:
            reason = _describe(exc)
            raise ConfigError([("provider.script", f"{path}: {reason}")]) from exc

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse:
        self.calls.append(request)
        index = sum(isinstance(e, AssistantTurn) for e in request.entries)
        if index >= len(self.turns):
            raise ScriptExhausted(
                f"the script has {len(self.turns)} turns and turn {index + 1} was asked for")
        self.played.add(index)
        turn = self.turns[index]
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if turn.error is not None:
            raise ProviderError(turn.error)
        if on_text is not None and turn.text:
            for i, piece in enumerate(_pieces(turn.text, turn.chunks)):
                if i and turn.chunk_delay_s:
                    await asyncio.sleep(turn.chunk_delay_s)
                await on_text(piece)
        calls = tuple(
            ToolCall(id=c.id or f"call_{index}_{j}", name=c.name, arguments=c.arguments)
            for j, c in enumerate(turn.tool_calls))
        return ModelResponse(text=turn.text, tool_calls=calls, usage=turn.usage,
                             model=self.model, stop_reason="tool_use" if calls else "end_turn")

    def assert_complete(self) -> None:
        unused = [i for i in range(len(self.turns)) if i not in self.played]
        if unused:
            raise AssertionError(f"scripted turns never played: {unused}")


def _pieces(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` pieces of about the same length (fewer for a short text)."""
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"turn {where}: {err['msg']}" if where else err["msg"]
    return str(exc)
