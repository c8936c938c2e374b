"""The offline default: no network, deterministic, and able to call a tool.

``/tool NAME {json}`` makes it call tool NAME with those arguments, then answer
with what the tool returned; anything else is echoed back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..model.attachments.parts import DocumentPart, ImagePart, TextPart
from ..model.entries import (
    LATE_RESULT,
    RESUMED_LATE,
    AssistantTurn,
    Entry,
    Notice,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from .base import ModelRequest, ModelResponse, TextSink
from .wire import part_for

__all__ = ["EchoProvider", "parse_tool_command"]

_TOOL_COMMAND = re.compile(r"^/tool\s+(?P<name>[\w.-]+)\s*(?P<args>.*)$", re.DOTALL)


def parse_tool_command(text: str) -> tuple[str, object] | None:
    """``'/tool clock {"tz": "UTC"}'`` -> ``("clock", {"tz": "UTC"})``; None if not a command.

    Arguments that are not valid JSON are passed on as the raw string, so the
    registry answers with an ``invalid_arguments`` result, as it would for a model.
    """
    match = _TOOL_COMMAND.match(text.strip())
    if match is None:
        return None
    raw = match["args"].strip()
    if not raw:
        return match["name"], {}
    try:
        return match["name"], json.loads(raw)
    except ValueError:
        return match["name"], raw


def _received(user: UserMessage | None, request: ModelRequest) -> str:
    """What the echo model was shown of the message's files, a line each (the offline
    default's way of showing that files arrive)."""
    if user is None or not user.files:
        return ""
    lines = []
    for ref in user.files:
        part = part_for(ref, request.files)
        how = {ImagePart: "an image", DocumentPart: "a document"}.get(type(part)) or (
            f"{len(part.text):,} characters of text" if isinstance(part, TextPart)
            and part.how == "text" else "a note")
        lines.append(f"\n[received {ref.describe()}, shown as {how}]")
    return "".join(lines)


def _late(entry: object) -> bool:
    return isinstance(entry, Notice) and entry.code == LATE_RESULT


def _last_results(entries: Sequence[Entry], last: object) -> list[ToolResult]:
    """The results at the end of ``entries``; for a late-result notice at the end, those
    of its run's last turn with calls (beside that turn)."""
    if isinstance(last, ToolResult):
        out: list[ToolResult] = []
        for entry in reversed(entries):
            if not isinstance(entry, ToolResult):
                break
            out.append(entry)
        return out[::-1]
    assert isinstance(last, Notice)
    for i in range(len(entries) - 1, -1, -1):
        turn = entries[i]
        if isinstance(turn, AssistantTurn) and turn.tool_calls and turn.run_id == last.run_id:
            out = []
            for j in range(i + 1, len(entries)):
                result = entries[j]
                if not isinstance(result, ToolResult):
                    break
                out.append(result)
            return out
    return []


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class EchoProvider:
    """Echoes the user, or runs ``/tool NAME {json}`` and reports the result."""

    model = "echo"

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse:
        entries = request.entries
        last = entries[-1] if entries else None
        calls: tuple[ToolCall, ...] = ()
        if isinstance(last, ToolResult) or _late(last):
            # Results that came after the thread went on are beside their call, with a
            # notice where they came (``history.model_view``): those are reported.
            results = [f"{entry.name} returned {json.dumps(entry.content)}"
                       for entry in _last_results(entries, last)]
            text = "; ".join(results)
        else:
            # A run taken up again after the thread went on answers its own message.
            resumed = last.run_id if isinstance(last, Notice) and last.code == RESUMED_LATE \
                else None
            user = next((e for e in reversed(entries) if isinstance(e, UserMessage)
                         and resumed in (None, e.run_id)), None)
            said = user.text if user else ""
            command = parse_tool_command(said)
            if command is not None and not request.final_turn and isinstance(
                    last, UserMessage | Notice):
                name, arguments = command
                turn_no = sum(isinstance(e, AssistantTurn) for e in entries)
                calls = (ToolCall(id=f"echo_{turn_no}", name=name, arguments=arguments),)
                text = ""
            else:
                text = f"echo: {said}" + _received(user, request)
        if on_text is not None and text:
            for i, word in enumerate(text.split(" ")):
                await on_text(word if i == 0 else " " + word)
        prompt = sum(_tokens(getattr(e, "text", "") or "")
                     + sum(f.tokens for f in getattr(e, "files", ())) for e in entries)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=Usage(input_tokens=prompt + _tokens(request.system), output_tokens=_tokens(text)),
            model=self.model,
            stop_reason="tool_use" if calls else "end_turn",
        )
