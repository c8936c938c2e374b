"""``memory``: ``remember``, ``recall`` and ``forget`` notes kept in the store.

Per thread by default (``[tools.memory] scope = "thread"``: a schedule's thread
remembers across its runs, a Slack conversation across its messages), or one set for
the whole agent (``scope = "agent"``). ``remember`` and ``forget`` are
``idempotent_write``, keyed by the call's idempotency key: the store records the key in the
write that applies the call, so a call re-run after a crash changes nothing more, even when
another thread wrote the same key in between (agent scope). ``recall`` is ``read_only``.
"""

from __future__ import annotations

from typing import Any

from ..model.config import MemoryConfig
from ..serving.notes import Notes
from ..stores.erasure import thread_scope
from ..tools.base import Tool, ToolContext, tool

__all__ = ["make_memory"]

_MAX_KEY = 200
_MAX_FOUND = 20


def make_memory(cfg: MemoryConfig) -> list[Tool]:
    """The three tools; each gets the runtime's ``notes`` service in its context."""

    def notes(ctx: ToolContext) -> Notes:
        found: Notes = ctx.service("notes")
        return found

    def scope(ctx: ToolContext) -> str:
        return "agent" if cfg.scope == "agent" else thread_scope(ctx.thread_id)

    @tool(name="remember", effect="idempotent_write", timeout_s=10, needs=["notes"])
    async def remember(ctx: ToolContext, key: str, text: str) -> dict[str, Any]:
        """Keep a note under a short key, for later conversations (replaces the note of
        that key). E.g. key "standup-time", text "The team meets at 9:15, Mon-Thu"."""
        key = key.strip()
        if not key or len(key) > _MAX_KEY:
            raise ValueError(f"a key is 1 to {_MAX_KEY} characters")
        if len(text) > cfg.max_chars:
            raise ValueError(f"a note is at most {cfg.max_chars:,} characters "
                             f"([tools.memory] max_chars); this one has {len(text):,}")
        kept = await notes(ctx).notes(scope(ctx))
        if len(kept) >= cfg.max_notes and all(n.key != key for n in kept):
            raise ValueError(f"there are {len(kept)} notes, the most kept ([tools.memory] "
                             "max_notes): forget one first")
        await notes(ctx).remember(scope(ctx), key, text, call=ctx.idempotency_key)
        return {"remembered": key}

    @tool(name="recall", effect="read_only", timeout_s=10, needs=["notes"])
    async def recall(ctx: ToolContext, query: str = "") -> dict[str, Any]:
        """Find notes kept with `remember`: those whose key or text contain any word of
        `query` (best matches first), or the most recent ones for an empty query."""
        found_notes = await notes(ctx).notes(scope(ctx))
        words = [w for w in query.casefold().split() if w]

        def score(note: Any) -> int:
            haystack = f"{note.key} {note.text}".casefold()
            return sum(word in haystack for word in words)

        found = [n for n in found_notes if not words or score(n) > 0]
        found.sort(key=lambda n: (score(n), n.updated_at), reverse=True)
        return {"notes": [{"key": n.key, "text": n.text} for n in found[:_MAX_FOUND]],
                "total": len(found_notes)}

    @tool(name="forget", effect="idempotent_write", timeout_s=10, needs=["notes"])
    async def forget(ctx: ToolContext, key: str) -> dict[str, Any]:
        """Remove the note of a key."""
        existed = await notes(ctx).forget(scope(ctx), key.strip(), call=ctx.idempotency_key)
        return {"forgotten": key.strip(), "existed": existed}

    return [remember, recall, forget]
