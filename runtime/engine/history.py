"""What the model is shown of a thread: a valid conversation, whatever the store holds.

The store keeps the truth (a run that timed out waiting for approval keeps its
unanswered call, so a later approval can still run it). A model API, though,
wants every tool call answered right after the turn that made it. ``model_view``
moves each result next to its call and answers the calls that have no result.

A result that came after the thread went on (a call decided after its run timed out,
while later messages were answered; or decided after another run of the thread went on
meanwhile) leaves a ``late_result`` notice where it came: moved
back beside its call, it is no longer the last thing the model sees, and the history
would end with the last run's answer; the notice says whose answer goes on, and quotes
its message, so the model answers that message and not the latest one. A run resumed
after the thread went on without it (it failed, later messages were answered, a person
resumed it) has no such result to show: it leaves a ``resumed_late`` notice
(``resumed_notice``), kept in the thread, for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model.entries import (
    LATE_RESULT,
    RESUMED_LATE,
    AssistantTurn,
    Entry,
    Notice,
    ToolResult,
    UserMessage,
)
from ..tools.base import error_result

__all__ = ["Tidiness", "late_notice", "model_view", "resumed_notice"]

_QUOTED = 300  # characters of the run's message the notice quotes


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
    late = _late(entries)
    view: list[Entry] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, ToolResult):
            if i in late:
                view.append(late[i])
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


def _that_message(text: str, files: bool) -> str:
    text = text.strip() or ("(files only)" if files else "(empty)")
    quoted = text if len(text) <= _QUOTED else text[:_QUOTED].rstrip() + "…"
    return f' That message: "{quoted}"'


def late_notice(result: ToolResult, names: Sequence[str], message: UserMessage | None
                ) -> Notice:
    """What the model is told where ``result`` (with the others of its batch, ``names``
    their tools) came in after the thread went on: whose answer goes on, quoting the
    run's ``message``."""
    said = "" if message is None else _that_message(message.text, bool(message.files))
    calls = ", ".join(dict.fromkeys(names))
    return Notice(run_id=result.run_id, code=LATE_RESULT, at=result.at, text=(
        f"The result of your call to {calls} came only now, after the conversation went on; "
        "it is shown right after that call. Go on with your answer to the message the call "
        f"was for, not to the latest message.{said}"))


def resumed_notice(run_id: str, text: str, files: bool, entries: Sequence[Entry], *,
                   at: float) -> Notice | None:
    """What a run taken up again (resumed) adds to its thread, if the thread went on
    without it (its last entry is another run's): whose answer goes on, quoting the run's
    message (``text``; ``files``: it has some). None if the run's own entries are last."""
    if not entries or entries[-1].run_id == run_id:
        return None
    return Notice(run_id=run_id, code=RESUMED_LATE, at=at, text=(
        "This request was taken up again after the conversation went on without it. Go on "
        "with your answer to the message it was for, not to the latest message."
        + _that_message(text, files)))


def _late(entries: Sequence[Entry]) -> dict[int, Notice]:
    """Where a batch of results came after entries of another run that followed their
    call (the thread went on): the position of its first result, with the notice that
    stands there."""
    calls: dict[tuple[str, str], int] = {}  # (run, call) -> where the call is
    messages: dict[str, UserMessage] = {}  # run -> its (first) message
    turns: list[tuple[int, str]] = []  # where each stretch of one run's entries starts
    out: dict[int, Notice] = {}
    batch: tuple[int, ToolResult, list[str]] | None = None  # the late batch being read
    for i, entry in enumerate(entries):
        if not turns or turns[-1][1] != entry.run_id:
            turns.append((i, entry.run_id))
        if not isinstance(entry, ToolResult):
            batch = None
            if isinstance(entry, AssistantTurn):
                calls.update({(entry.run_id, c.id): i for c in entry.tool_calls})
            elif isinstance(entry, UserMessage):
                messages.setdefault(entry.run_id, entry)
            continue
        at = calls.get((entry.run_id, entry.tool_call_id))
        if at is None or not _went_on(turns, at, entry.run_id):
            batch = None
            continue
        if batch is None or batch[1].run_id != entry.run_id:
            batch = (i, entry, [])
        batch[2].append(entry.name)
        out[batch[0]] = late_notice(batch[1], batch[2], messages.get(entry.run_id))
    return out


def _went_on(turns: Sequence[tuple[int, str]], since: int, run_id: str) -> bool:
    """Whether another run's entries came after position ``since``."""
    for at, run in reversed(turns):
        if at <= since:
            return False
        if run != run_id:
            return True
    return False
