"""The memory flush: before what falls out of the context window is summarised, the model
is asked once what of it is worth keeping, and each statement it names is kept by the
tools that have a keeper (the ``memory`` built-in: a thread memory each).

The summary keeps the gist for this thread's model; a memory is found again by ``recall``
(and recalled unasked) wherever it is visible. The flush runs inside ``compact``, before
the summary's request: its writes are committed (each with its own idempotency key) before
the summary notice is, so a crash between them re-runs the flush, which writes nothing
twice, then the summary.

The answer's format (``statements``): a JSON list of strings, or a bulleted list, one
statement a line; anything else (prose, an empty list, nothing) keeps nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ProviderError, StoreError
from ..model.entries import Entry, Usage, UserMessage
from ..model.memories import MAX_MEMORY_CHARS
from ..providers.base import ModelRequest, Provider
from ..tools.base import Tool
from ..tools.keeping import Keeping
from .context import transcript
from .cursor import RunCursor

__all__ = ["FLUSH_PROMPT", "MAX_FLUSHED", "Flushing", "flush", "flush_key", "flushing",
           "statements"]

log = logging.getLogger("maiden.loop")

MAX_FLUSHED = 20
"""The most statements one flush keeps (a model that lists more is cut off there)."""

FLUSH_PROMPT = (
    "The start of a conversation between a team and their assistant is about to leave the "
    "assistant's view. List what of it is worth remembering later: facts, decisions, "
    "names, numbers, preferences, commitments; each one short statement that stands on its "
    "own (\"The staging database is db-7\"). Leave out small talk and what is only true "
    "for a moment. Answer with a JSON list of strings only, [] if nothing is worth keeping.")

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+(.*\S)\s*$")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Flushing:
    """The tools that keep what a flush chooses, and what their keepers are handed."""

    keepers: tuple[Tool, ...]
    services: Mapping[str, Any]
    agent: str


def flushing(tools: Iterable[Tool], services: Mapping[str, Any], agent: str
             ) -> Flushing | None:
    """The agent's flush, or None when no tool of it has a keeper (no flush is asked)."""
    keepers = tuple(t for t in tools if t.keeper is not None)
    return Flushing(keepers, services, agent) if keepers else None


def flush_key(thread_id: str, since: int, covers: int) -> str:
    """The flush's idempotency key: the thread and the compaction point (the summary before
    covered ``since`` entries, the new one will cover ``covers``)."""
    return f"flush:{thread_id}:{since}:{covers}"


def statements(answer: str) -> list[str]:
    """The statements of the model's answer: a JSON list's strings (fenced or with words
    around it), else the lines of a bulleted or numbered list; none for anything else.
    Each is collapsed to one line; empty ones, repeats and ones over
    ``MAX_MEMORY_CHARS`` are dropped; at most ``MAX_FLUSHED``."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    found = _json_list(text)
    if found is None:
        found = [m.group(1) for line in text.splitlines() if (m := _BULLET.match(line))]
    kept: list[str] = []
    for item in found:
        one = " ".join(item.split())
        if one and len(one) <= MAX_MEMORY_CHARS and one not in kept:
            kept.append(one)
    return kept[:MAX_FLUSHED]


def _json_list(text: str) -> list[str] | None:
    """The strings of the JSON list ``text`` is (or holds, from its first ``[`` to its last
    ``]``); None if it holds none."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, str)]


def flush_request(cur: RunCursor, falling: Sequence[Entry], max_chars: int) -> ModelRequest:
    """The request that asks what of ``falling`` is worth keeping (no tools: one answer)."""
    run = cur.run
    return ModelRequest(
        system=FLUSH_PROMPT, entries=(UserMessage(run_id=run.id,
                                                  text=transcript(falling, max_chars)),),
        tools=(), run_id=run.id, thread_id=run.thread_id, final_turn=True)


async def flush(cur: RunCursor, provider: Provider, keep: Flushing, falling: Sequence[Entry],
                key: str, max_chars: int) -> Usage:
    """Ask the model once what of ``falling`` to keep and hand it to the keepers; what the
    request spent. A failed request or keeper is logged and the summary goes on (a flush
    helps; it is not a reason to stop), except a store's error, which is the run's."""
    run = cur.run
    try:
        response = await provider.complete(flush_request(cur, falling, max_chars), None)
    except ProviderError as exc:
        log.warning("run %s: the memory flush failed (%s); nothing kept", run.id, exc)
        return Usage()
    found = tuple(statements(response.text))
    if not found:
        return response.usage
    for tool in keep.keepers:
        assert tool.keeper is not None
        keeping = Keeping(run_id=run.id, thread_id=run.thread_id, agent=keep.agent,
                          origin=run.origin, at=cur.clock(), statements=found, key=key,
                          services={n: keep.services[n] for n in tool.needs
                                    if n in keep.services})
        try:
            async with asyncio.timeout(tool.timeout_s):
                await tool.keeper(keeping)
        except StoreError:
            raise
        except Exception as exc:
            log.warning("run %s: the keeper of %s failed (%s: %s); nothing more kept",
                        run.id, tool.name, type(exc).__name__, exc)
    return response.usage
