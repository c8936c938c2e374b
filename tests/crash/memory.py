"""The memory drills' parts (``--memory``, with ``--compaction``): the ``memory`` built-in
offered, the compacting model answering the memory flush's request, and calling
``remember`` for a message that asks it to ("remember: ...").

Its kill points are ``MEMORY_KILL_POINTS`` (the driver's stores reach the write ones in
``put_memory``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from runtime import ModelRequest, ModelResponse, UserMessage
from runtime.model.entries import ToolCall

__all__ = ["MEMORY_KILL_POINTS", "memory_answer", "written_points"]

MEMORY_KILL_POINTS = (
    "in_flush",                     # the model is asked what to keep, nothing stored yet
    "before_flush_memory_written",  # a statement of the flush is about to be written
    "after_flush_memory_written",   # a statement of the flush is written (fsynced)
    # then ``in_summary``: the flush's memories are written, the summary is being asked
    "before_remember_written",      # inside remember, its memory not yet written
    "after_remember_written",       # remember's memory is written, its result not stored
)

_ASKED = re.compile(r"remember: (.+)$")
_USER = re.compile(r"^user: (\d+):", re.MULTILINE)


class Switch(Protocol):
    def reached(self, point: str) -> None: ...


def written_points(call: str | None) -> tuple[str, str]:
    """The kill points around a memory's write: the flush's (its key starts ``flush:``),
    a note's becoming one (``note ``: ``tests/crash/notes.py``) or ``remember``'s."""
    what = "remember"
    if call is not None and call.startswith("flush:"):
        what = "flush_memory"
    elif call is not None and call.startswith("note "):
        what = "note_memory"
    return f"before_{what}_written", f"after_{what}_written"


def memory_answer(request: ModelRequest, switch: Switch) -> ModelResponse | None:
    """The answer of the drill's model to the flush's request (one statement per message
    that falls out, where ``in_flush`` kills), or a ``remember`` call for a new message that
    asks for one; None for any other request."""
    from runtime.engine.flush import FLUSH_PROMPT

    if request.system == FLUSH_PROMPT:
        switch.reached("in_flush")
        text = request.entries[0].text  # type: ignore[union-attr]
        kept = [f"message {n} was about the quarterly plan" for n in _USER.findall(text)]
        return ModelResponse(text=json.dumps(kept))
    last: Any = request.entries[-1] if request.entries else None
    asked = _ASKED.search(last.text) if isinstance(last, UserMessage) else None
    if asked is None:
        return None
    call = ToolCall(id=f"remember-{request.run_id}", name="remember",
                    arguments={"text": asked.group(1)})
    return ModelResponse(text="", tool_calls=(call,))
