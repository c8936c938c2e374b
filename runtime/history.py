"""What the model is shown of a thread: a valid conversation, whatever the store holds.

The store keeps the truth (a run that timed out waiting for approval keeps its
unanswered call, so a later approval can still run it). A model API, though,
wants every tool call answered right after the turn that made it. ``model_view``
moves each result next to its call and answers the calls that have no result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .entries import AssistantTurn, Entry, ToolResult
from .tools import error_result

__all__ = ["Tidiness", "model_view"]


@dataclass
class Tidiness:
    """Whether every call so far is followed directly by its results (the usual case).

    Checked incrementally: threads only grow, so each turn looks at the new entries
    only, instead of walking the whole thread again.
    """

    checked: int = 0
    expecting: list[str] = field(default_factory=list)
    tidy: bool = True

    def check(self, entries: Sequence[Entry]) -> bool:
        if len(entries) < self.checked:
            self.checked, self.expecting, self.tidy = 0, [], True
        while self.tidy and self.checked < len(entries):
            entry = entries[self.checked]
            if isinstance(entry, ToolResult):
                if not self.expecting or self.expecting[0] != entry.tool_call_id:
                    self.tidy = False
                    break
                self.expecting.pop(0)
            elif self.expecting:
                self.tidy = False
                break
            if isinstance(entry, AssistantTurn):
                self.expecting = [c.id for c in entry.tool_calls]
            self.checked += 1
        return self.tidy


def model_view(entries: Sequence[Entry], tidiness: Tidiness | None = None) -> Sequence[Entry]:
    """The entries in an order every provider accepts; the thread itself when it is tidy.

    Pass the thread's ``Tidiness`` to keep the check incremental across turns.
    """
    if (tidiness or Tidiness()).check(entries):
        return entries
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
