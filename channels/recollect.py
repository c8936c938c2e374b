"""``/maiden memory`` and ``/maiden forget ID``: what maiden remembers that applies where
the command is typed, and forgetting one of those, on Slack and Discord alike.

The conversation is built the way a run's is (``here_of`` on the ``Origin`` a message
typed there would carry: the place and the places that hold it, private or not, the
person, the rights the access rules grant them there, the agent the routes give the
place), so the list is what a run there could recall, and ``forget`` is refused as the
``forget`` tool refuses it (``forget_refusal``): only who said it, the person it is about,
or someone with ``operate`` there."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtime import Here, Memory, Origin, Runtime, Where, forget_refusal, here_of, source_words

from .access import RIGHTS, Place, Right

__all__ = ["SHORT_ID", "SHOWN", "forgotten", "listed", "origin_of", "short"]

SHORT_ID = 8
"""How many characters of a memory's id a list shows (and ``forget`` takes)."""
SHOWN = 20
"""The most memories one ``/maiden memory`` lists (the newest)."""
LONGEST = 300
"""The most characters of a memory's text a list shows (a memory may hold 2,000, and an
answer is one chat message)."""
PREFIX = "m"
"""What every memory id starts with (``model.memories.memory_id``), not shown."""


def short(memory_id: str) -> str:
    """The id as a list shows it: its first ``SHORT_ID`` characters after the ``m``."""
    return memory_id.removeprefix(PREFIX)[:SHORT_ID]


def origin_of(channel: str, user: str, where: Place, may: Callable[[Right], bool]) -> Origin:
    """The origin a message from ``user`` at ``where`` would carry."""
    return Origin(channel=channel, user=user, place=where.ids, direct=where.direct,
                  private=where.direct or where.private,
                  rights=tuple(r for r in RIGHTS if may(r)))


async def _here(runtime: Runtime, origin: Origin, thread_id: str) -> Here:
    agent = runtime.operator.agents.route(Where.of(thread_id, origin))
    memories = runtime.kept.memories
    return here_of(origin, thread_id=thread_id, agent=agent,
                   people=await memories.people(thread_id), at=memories.now())


async def listed(runtime: Runtime, origin: Origin, thread_id: str) -> str:
    """The memories that apply here, newest first, each with its short id and source."""
    found = await runtime.kept.memories.recall("", await _here(runtime, origin, thread_id),
                                               SHOWN)
    if not found:
        return "I remember nothing that applies here."
    lines = [f"What I remember that applies here ({len(found)}"
             + (", the newest" if len(found) == SHOWN else "") + "):"]
    lines += [_line(m) for m in found]
    lines.append("`/maiden forget ID` forgets one (yours, one about you, or any with the "
                 "operate right); or ask me to \"forget what I told you about …\".")
    return "\n".join(lines)


def _line(memory: Memory) -> str:
    text = memory.text if len(memory.text) <= LONGEST else memory.text[:LONGEST - 1] + "…"
    return f"• `{short(memory.id)}` {text} ({source_words(memory)}; {memory.scope.kind})"


async def forgotten(runtime: Runtime, origin: Origin, thread_id: str,
                    words: Sequence[str]) -> str:
    """Forget the memory visible here whose id starts with the one given; what happened."""
    if len(words) != 1 or not words[0].strip():
        return "Usage: `/maiden forget ID` (the id `/maiden memory` shows)."
    given = words[0].strip().removeprefix(PREFIX).lower()
    here = await _here(runtime, origin, thread_id)
    memories = runtime.kept.memories
    found = [m for m in await memories.recall("", here, 1_000)
             if m.id.removeprefix(PREFIX).startswith(given)]
    if not found:
        return f"There is no memory `{given}` here (`/maiden memory` lists them)."
    if len(found) > 1:
        return f"`{given}` names {len(found)} memories here: give more of its id."
    memory = found[0]
    why = forget_refusal(memory, origin)
    if why is not None:
        return f"Not forgotten: {why}."
    await memories.forget(memory.id, here)
    return f"Forgotten: {memory.text}"
