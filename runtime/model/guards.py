"""Guard decisions as plain functions: no I/O, tested with tables."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from .entries import ToolCall

__all__ = ["call_key", "canonical_json", "is_repeat", "too_long", "turn_budget"]


def canonical_json(value: Any) -> str:
    """One spelling per JSON value: sorted keys, no spaces, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def call_key(name: str, arguments: Any) -> str:
    """The identity of a tool call for the repeated-call guard."""
    return hashlib.sha256(f"{name}\x00{canonical_json(arguments)}".encode()).hexdigest()


def is_repeat(previous: Sequence[ToolCall], call: ToolCall, limit: int) -> bool:
    """True when ``call`` would be the ``limit``-th identical call in a row (the same
    ``call_key``: worked out only once there are that many calls)."""
    if limit < 2 or len(previous) < limit - 1:
        return False
    key = call_key(call.name, call.arguments)
    return all(call_key(c.name, c.arguments) == key for c in previous[-(limit - 1):])


def turn_budget(turns_taken: int, max_turns: int) -> str:
    """``"ok"``, ``"final"`` (last turn: no tools) or ``"exceeded"`` for the next model turn."""
    if turns_taken >= max_turns:
        return "exceeded"
    if turns_taken == max_turns - 1:
        return "final"
    return "ok"


def too_long(length: int, limit: int) -> str | None:
    """Why a message of ``length`` characters is refused (the words every channel shows the
    person, with the exact limit), or None when it fits ``[agent] max_message_chars``."""
    if length <= limit:
        return None
    return (f"Your message is too long: it has {length:,} characters and the limit is "
            f"{limit:,}. Please shorten it or send it in parts.")
