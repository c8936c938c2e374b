"""``memory``: ``remember``, ``recall`` and ``forget`` memories a team can trust, and the
ones that bear on a new message recalled unasked as its run starts.

Each memory has a scope the model chooses (``thread``, ``place``, ``person``, ``agent``,
``workspace``; ``[tools.memory] scopes`` says which it may write) and a provenance taken
from the run: who said it (``slack:U123``), where, in which thread and run, when. Who may
write which scope and where a memory may be recalled are decided by ``model.memories``
(``write_refusal``, ``visible``); this module builds the conversation they judge from the
run's ``Origin`` (``model.recollection``): its place and privacy, the sender's rights as
the channel granted them, the thread's people.

``remember`` and ``forget`` are ``idempotent_write``, keyed by the call's idempotency key:
the store records the key in the write that applies the call, so a call re-run after a
crash changes nothing more and answers as it did. ``recall`` is ``read_only``. ``forget``
removes only a memory visible here, and only for who said it, the person it is about, or
someone with ``operate`` (``recollection.forget_refusal``).

The recall tool's prelude (``tools.prelude``) puts the memories most relevant to the new
message (at most ``recall_limit``, within ``recall_share`` of the context window, none that
the thread's last ``recalled`` notices show already) before the run's first model turn, as a
``recalled`` notice committed with the message.

Its keeper (``tools.keeping``; ``[tools.memory] flush``, on by default) keeps what the
memory flush chose before a compaction (``engine.flush``): a thread memory each, whose
provenance is the thread, the run, ``via = "memory flush"`` and the time, written under the
flush's key for its position, so the flush re-run after a crash writes none twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..errors import MemoryRefused, ToolFailure
from ..model.config import MemoryConfig
from ..model.entries import Entry, Notice
from ..model.memories import (
    MAX_MEMORY_CHARS,
    SCOPE_KINDS,
    Here,
    Memory,
    ScopeKind,
    ThreadScope,
    Writer,
    memory_id,
)
from ..model.recollection import (
    RECALLED,
    forget_refusal,
    here_of,
    provenance_of,
    recalled_text,
    scope_of,
    source_words,
    writer_of,
)
from ..serving.memories import Memories
from ..stores.tail import first_loaded
from ..tools.base import Tool, ToolContext, tool
from ..tools.keeping import Keeping
from ..tools.prelude import Opening

__all__ = ["FLUSHED", "NO_WINDOW", "make_memory"]

_MAX_FOUND = 20
NO_WINDOW = 32_000
"""The context window, in tokens, a recall's share is of when the model's is not known."""
_DAY_S = 86_400.0
LOOKED_BACK = 100
"""How many of a thread's last entries are looked through for memories already recalled
there (those are not recalled again: the model sees them)."""
_RECALLED_ID = re.compile(r"^- \[(m[0-9a-f]+)\] ", re.MULTILINE)


def _remember(cfg: MemoryConfig) -> Tool:
    """``remember``, offering the scopes ``cfg`` lets the model write."""
    allowed = [k for k in SCOPE_KINDS if k in cfg.writable]
    max_chars = min(cfg.max_chars, MAX_MEMORY_CHARS)

    @tool(name="remember", effect="idempotent_write", timeout_s=10, needs=["memories"],
          description=(
              "Keep a short statement for later conversations, e.g. \"The team meets at "
              "9:15, Mon-Thu\". scope: who it is for, one of " + ", ".join(allowed)
              + f" (default {cfg.default}): thread = this conversation, place = this "
              "channel, person = the person speaking, agent = this agent everywhere, "
              "workspace = every conversation. expires_in_days: when it stops being true."))
    async def remember(ctx: ToolContext, text: str, scope: ScopeKind | None = None,
                       expires_in_days: float | None = None) -> dict[str, Any]:
        memories = _service(ctx)
        if len(text.strip()) > max_chars:
            raise ToolFailure(f"a memory is at most {max_chars:,} characters "
                              f"([tools.memory] max_chars); this one has {len(text):,}")
        if expires_in_days is not None and expires_in_days <= 0:
            raise ToolFailure("expires_in_days must be more than 0")
        now = memories.now()
        source = provenance_of(ctx.origin, thread_id=ctx.thread_id, run_id=ctx.run_id, at=now)
        kind = scope or cfg.default
        try:
            await memories.remember(
                text, scope_of(kind, source, ctx.agent), source,
                writer_of(ctx.origin, ctx.agent, cfg.writable), call=ctx.idempotency_key,
                expires_at=None if expires_in_days is None else now + expires_in_days * _DAY_S)
        except MemoryRefused as exc:
            raise ToolFailure(str(exc)) from None
        # The id is the call's: a re-run call (which writes nothing) answers the same.
        return {"remembered": memory_id(ctx.idempotency_key), "scope": kind}

    if cfg.flush:
        @remember.keeps
        async def flushed(keeping: Keeping) -> int:
            """What the memory flush chose (``engine.flush``): a thread memory each."""
            return await _keep(keeping, max_chars)

    return remember


def make_memory(cfg: MemoryConfig) -> list[Tool]:
    """The three tools, on the runtime's ``memories`` service; ``recall`` has the prelude."""
    remember = _remember(cfg)

    @tool(name="recall", effect="read_only", timeout_s=10, needs=["memories"])
    async def recall(ctx: ToolContext, query: str = "") -> dict[str, Any]:
        """Find memories kept with `remember` that may be shown here: those holding a word
        of `query`, best first (the most recent, for an empty query); each with its id,
        text, who said it where and when (source), and scope."""
        memories = _service(ctx)
        found = await memories.recall(query, await _here(memories, ctx), _MAX_FOUND)
        return {"memories": [_shown(m) for m in found]}

    @tool(name="forget", effect="idempotent_write", timeout_s=10, needs=["memories"])
    async def forget(ctx: ToolContext, id: str) -> dict[str, Any]:
        """Remove a memory by its id (from `recall`). Only who said it, the person it is
        about, or someone with the operate right may."""
        memories = _service(ctx)
        here = await _here(memories, ctx)
        found = await memories.get(id.strip(), here)
        why = forget_refusal(found, ctx.origin) if found is not None else None
        if why is not None:
            raise ToolFailure(why)
        existed = await memories.forget(id.strip(), here, call=ctx.idempotency_key)
        return {"forgotten": id.strip(), "existed": existed}

    @recall.opens
    async def recalled(opening: Opening) -> Notice | None:
        """The memories that bear on the new message, within the share of the window."""
        if cfg.recall_limit == 0 or cfg.recall_share == 0:
            return None
        memories: Memories = opening.service("memories")
        here = here_of(opening.origin, thread_id=opening.thread_id, agent=opening.agent,
                       people=await memories.people(opening.thread_id), at=opening.at)
        shown = _recalled_before(opening.thread)
        found = [m for m in await memories.recall(opening.text, here,
                                                  cfg.recall_limit + len(shown))
                 if m.id not in shown][:cfg.recall_limit]
        text = recalled_text(found, int(cfg.recall_share * (opening.window or NO_WINDOW)))
        return None if text is None else Notice(run_id=opening.run_id, code=RECALLED,
                                                text=text, at=opening.at)

    return [remember, recall, forget]


FLUSHED = "memory flush"
"""The provenance's ``via`` of a memory the flush kept."""


async def _keep(keeping: Keeping, max_chars: int) -> int:
    """Keep each statement as a memory of the thread, written under the flush's key for
    its position (a re-run writes none again); how many were written."""
    memories: Memories = keeping.service("memories")
    source = provenance_of(keeping.origin, thread_id=keeping.thread_id,
                           run_id=keeping.run_id, at=keeping.at)
    source = source.model_copy(update={"user": None, "via": FLUSHED})
    scope = ThreadScope(thread_id=keeping.thread_id)
    writer = Writer(agent=keeping.agent, allowed=frozenset({"thread"}))
    written = 0
    for n, text in enumerate(keeping.statements):
        if len(text) > max_chars:
            continue
        if await memories.remember(text, scope, source, writer, call=keeping.call(n)):
            written += 1
    return written


def _recalled_before(thread: Sequence[Entry]) -> set[str]:
    """The ids of the memories that recalled notices among the thread's last
    ``LOOKED_BACK`` entries show."""
    start = max(len(thread) - LOOKED_BACK, first_loaded(thread))
    return {found for i in range(start, len(thread))
            if isinstance(entry := thread[i], Notice) and entry.code == RECALLED
            for found in _RECALLED_ID.findall(entry.text)}


def _service(ctx: ToolContext) -> Memories:
    found: Memories = ctx.service("memories")
    return found


async def _here(memories: Memories, ctx: ToolContext) -> Here:
    return here_of(ctx.origin, thread_id=ctx.thread_id, agent=ctx.agent,
                   people=await memories.people(ctx.thread_id), at=memories.now())


def _shown(memory: Memory) -> dict[str, Any]:
    return {"id": memory.id, "text": memory.text, "source": source_words(memory),
            "scope": memory.scope.kind}
