"""What the model is shown of a thread: a valid conversation, whatever the store holds.

The store keeps the truth (a run that timed out waiting for approval keeps its
unanswered call, so a later approval can still run it). A model API, though,
wants every tool call answered right after the turn that made it. ``model_view``
moves each result next to its call and answers the calls that have no result.
"""

from __future__ import annotations

from collections.abc import Sequence

from .entries import AssistantTurn, Entry, ToolResult
from .tools import error_result

__all__ = ["model_view"]


def model_view(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """The entries in an order every provider accepts; a no-op for a tidy thread."""
    if _tidy(entries):
        return tuple(entries)
    results = {(e.run_id, e.tool_call_id): e for e in entries if isinstance(e, ToolResult)}
    view: list[Entry] = []
    for entry in entries:
        if isinstance(entry, ToolResult):
            continue
        view.append(entry)
        if isinstance(entry, AssistantTurn):
            for call in entry.tool_calls:
                found = results.get((entry.run_id, call.id))
                if found is None:
                    missing = error_result("cancelled", "this call never ran: its run ended "
                                           "before a result was recorded")
                    found = ToolResult(run_id=entry.run_id, tool_call_id=call.id, name=call.name,
                                       content=missing.content, is_error=True, at=entry.at)
                view.append(found)
    return tuple(view)


def _tidy(entries: Sequence[Entry]) -> bool:
    """True when every call is followed directly by its results (the usual case)."""
    expecting: list[str] = []
    for entry in entries:
        if isinstance(entry, ToolResult):
            if not expecting or expecting[0] != entry.tool_call_id:
                return False
            expecting.pop(0)
        elif expecting:
            return False
        if isinstance(entry, AssistantTurn):
            expecting = [c.id for c in entry.tool_calls]
    return True
