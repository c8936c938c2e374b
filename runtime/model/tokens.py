"""About how many tokens an entry takes in a request: estimates (about four characters a
token, plus a little per message), meant to keep a request under a limit, not to bill it.
The context window and the stores' thread tail both count with them."""

from __future__ import annotations

from typing import Any

from .entries import AssistantTurn, Entry, Notice, ToolResult

__all__ = ["CHARS_PER_TOKEN", "MESSAGE_OVERHEAD", "entry_tokens", "estimate_tokens"]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a message costs beyond its text: role markers and separators."""


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _sized(value: Any) -> str:
    # For a length, repr is as good as JSON (the same separators; quotes, true/false and
    # null/None the same size) and several times cheaper.
    return value if isinstance(value, str) else repr(value)


def entry_tokens(entry: Entry) -> int:
    """About how many tokens ``entry`` takes in a request."""
    if isinstance(entry, AssistantTurn):
        text = entry.text + "".join(c.id + c.name + _sized(c.arguments)
                                    for c in entry.tool_calls)
    elif isinstance(entry, ToolResult):
        text = entry.tool_call_id + _sized(entry.content)
        if entry.images:
            return MESSAGE_OVERHEAD + estimate_tokens(text) + sum(i.tokens for i in entry.images)
    elif isinstance(entry, Notice):
        text = "[notice] " + entry.text
    else:
        return MESSAGE_OVERHEAD + estimate_tokens(entry.text) + sum(f.tokens for f in entry.files)
    return MESSAGE_OVERHEAD + estimate_tokens(text)
