"""What both HTTP wire formats need from a history before they translate it.

Vendor APIs are strict about tool calls: every call must be answered, right
after the turn that made it, and a result needs its call. ``pair_results``
makes a history (possibly cut by ``fit_history``, possibly stored by an older
version) obey that, without changing what the model is told.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..model.attachments.parts import FilePart, TextPart
from ..model.attachments.refs import FileRef
from ..model.entries import RUN_FAILED, AssistantTurn, Entry, Notice, ToolCall, ToolResult

__all__ = ["notice_text", "pair_results", "part_for", "result_text", "tool_arguments"]


def notice_text(notice: Notice) -> str:
    """A runtime notice, as user-role text the model can tell apart from the user."""
    return f"[notice] {notice.text}"


def part_for(ref: FileRef, files: Mapping[str, FilePart] | None) -> FilePart:
    """What a request shows of ``ref``: its part, or a line naming it if it has none."""
    part = (files or {}).get(ref.digest)
    return part if part is not None else TextPart(ref, f"[file {ref.describe()}]", "note")


def result_text(content: Any) -> str:
    """A tool result's content as the string both APIs accept."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def tool_arguments(raw: str) -> Any:
    """A tool call's argument JSON, parsed; the raw string when it does not parse, so the
    registry answers ``invalid_arguments`` and the model can correct itself."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def pair_results(entries: Sequence[Entry]) -> list[Entry]:
    """The entries with each assistant turn's results right after it.

    Empty assistant turns are left out; a notice among the results moves after
    them; a call with no result gets a ``cancelled`` error result; a result
    whose call is not in the history becomes a notice. A failed run's closing notice
    (``RUN_FAILED``) is an assistant turn, so the next message is a turn of its own;
    at the very end (the failed run was resumed) it is left out.
    """
    out: list[Entry] = []
    turn: AssistantTurn | None = None
    open_calls: dict[str, ToolCall] = {}
    held: list[Entry] = []

    def close() -> None:
        for call in open_calls.values():
            assert turn is not None
            out.append(ToolResult(
                run_id=turn.run_id, tool_call_id=call.id, name=call.name, is_error=True,
                content={"error": {"type": "cancelled",
                                   "message": "no result was recorded for this call"}}))
        open_calls.clear()
        out.extend(held)
        held.clear()

    for entry in entries:
        if isinstance(entry, ToolResult):
            if entry.tool_call_id in open_calls:
                del open_calls[entry.tool_call_id]
                out.append(entry)
                if not open_calls:
                    close()
            else:
                orphan = Notice(run_id=entry.run_id, code="orphan_result",
                                text=f"an earlier call to {entry.name} returned: "
                                     f"{result_text(entry.content)}")
                (held if open_calls else out).append(orphan)
        elif isinstance(entry, AssistantTurn):
            close()
            if entry.text or entry.tool_calls:
                out.append(entry)
                turn = entry
                open_calls = {c.id: c for c in entry.tool_calls}
        elif isinstance(entry, Notice) and open_calls:
            held.append(entry)
        elif isinstance(entry, Notice) and entry.code == RUN_FAILED:
            close()
            if entry is not entries[-1]:
                out.append(AssistantTurn(run_id=entry.run_id, text=notice_text(entry),
                                         at=entry.at))
        else:
            close()
            out.append(entry)
    close()
    return out
