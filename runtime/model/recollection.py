"""A run as the memories see it: who is speaking and where (``Provenance``, ``Here``), what
they may write (``Writer``), the scope a tool call names, and how a memory's source and a
recalled block read to the model. Pure functions: the ``memory`` built-in and its prelude
do the I/O.

People are named by channel and platform id (``slack:U123``, ``discord:42``,
``http:ci-bot``), so two platforms' ids cannot collide. The place is the origin's most
specific id (a Slack channel, a Discord thread or channel); the places that hold it (a
Discord thread's parent channel, its guild) are ``within``. A DM or a private channel is
private: what is learned there is recalled only there (``memories.visible``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from ..errors import MemoryRefused
from .memories import (
    OPERATE,
    AgentScope,
    Here,
    Memory,
    MemoryScope,
    PersonScope,
    PlaceScope,
    Provenance,
    ScopeKind,
    ThreadScope,
    WorkspaceScope,
    Writer,
)
from .runs import Origin
from .tokens import estimate_tokens

__all__ = ["RECALLED", "concerns", "edit_refusal", "forget_refusal", "here_of", "person",
           "provenance_of", "recalled_text", "scope_of", "source_words", "writer_of"]

RECALLED = "recalled"
"""The code of the notice that holds the memories recalled, unasked, as a run starts."""


def person(channel: str, user: str | None) -> str | None:
    """A person's id across channels (``slack:U123``); None when the origin names nobody."""
    return f"{channel}:{user}" if user else None


def _private(origin: Origin) -> bool:
    return origin.private or origin.direct


def here_of(origin: Origin, *, thread_id: str, agent: str, people: Iterable[str],
            at: float) -> Here:
    """The conversation a run of ``origin`` is in: its place, the places that hold it, the
    ``people`` of the thread (and the sender, always)."""
    own = person(origin.channel, origin.user)
    return Here(channel=origin.channel, place=origin.place[0] if origin.place else None,
                within=origin.place[1:], private=_private(origin), thread_id=thread_id,
                agent=agent, people=frozenset([*people, *([own] if own else [])]), at=at)


def provenance_of(origin: Origin, *, thread_id: str, run_id: str, at: float,
                  message: str | None = None) -> Provenance:
    """Where something said in a run of ``origin`` comes from (``message``: the platform's
    reference of the message, when there is one)."""
    return Provenance(user=person(origin.channel, origin.user), user_name=origin.user_name,
                      channel=origin.channel, place=origin.place[0] if origin.place else None,
                      private=_private(origin), thread_id=thread_id, run_id=run_id,
                      message=message, at=at)


def writer_of(origin: Origin, agent: str, allowed: Iterable[ScopeKind]) -> Writer:
    """Who writes from a run of ``origin``: its agent, the sender's rights there (as the
    channel granted them), the scopes the config allows."""
    return Writer(agent=agent, rights=frozenset(origin.rights), allowed=frozenset(allowed))


def scope_of(kind: ScopeKind, source: Provenance, agent: str) -> MemoryScope:
    """The scope of ``kind`` a memory learned at ``source`` gets: its thread, its place, its
    sender, the agent, the workspace; ``MemoryRefused`` where there is none (no place in a
    CLI or HTTP conversation, no known sender)."""
    match kind:
        case "thread":
            return ThreadScope(thread_id=source.thread_id)
        case "place":
            if source.place is None:
                raise MemoryRefused("this conversation has no place (a Slack or Discord "
                                    "channel): keep it in the thread instead")
            return PlaceScope(channel=source.channel, place=source.place,
                              private=source.private)
        case "person":
            if source.user is None:
                raise MemoryRefused("this conversation names no person: keep it in the "
                                    "thread instead")
            return PersonScope(user=source.user)
        case "agent":
            return AgentScope(agent=agent)
        case "workspace":
            return WorkspaceScope()


def forget_refusal(memory: Memory, origin: Origin) -> str | None:
    """Why the sender of a run of ``origin`` may not forget ``memory`` (one visible there),
    or None if they may: who said it may, so may the person a person memory is about, and
    whoever holds ``operate`` there."""
    if OPERATE in origin.rights or concerns(memory, person(origin.channel, origin.user)):
        return None
    return ("only who said it, the person it is about, or someone with the operate right "
            "may forget this memory")


def concerns(memory: Memory, who: str | None) -> bool:
    """Whether ``memory`` is ``who``'s (``slack:U123``, ``http:ci-bot``): they said it, or
    it is a person memory about them. What someone without ``operate`` sees of the
    memories outside a conversation (the HTTP API, the console), and may forget."""
    about = memory.scope.user if isinstance(memory.scope, PersonScope) else None
    return who is not None and who in (memory.provenance.user, about)


def edit_refusal(memory: Memory, who: str | None, rights: Iterable[str]) -> str | None:
    """Why ``who`` may not change the text of ``memory``, or None if they may: who said it
    may, and whoever holds ``operate`` (the person a memory is about may forget it, not
    put words in its author's mouth)."""
    if OPERATE in rights or (who is not None and who == memory.provenance.user):
        return None
    return "only who said it, or someone with the operate right, may edit this memory"


def source_words(memory: Memory) -> str:
    """Who said it, where, when, in a few words (``Ana, slack #C9, 3 Dec 2026``; the id
    ``slack:U1`` where the platform gave no name)."""
    p = memory.provenance
    who = p.user_name or p.user or p.via or "someone"
    if p.place is None:  # no thread: a note of the whole maiden's (``serving.adopted``)
        where = f"{p.channel} thread {p.thread_id}" if p.thread_id else p.channel
    elif p.private:
        where = f"a private {p.channel} conversation ({p.place})"
    else:
        where = f"{p.channel} #{p.place}"
    day = time.gmtime(p.at)
    return f"{who}, {where}, {day.tm_mday} {time.strftime('%b %Y', day)}"


_HEADER = ("Memories that may bear on this message, recalled from earlier conversations "
           "(each: its id, what was said, who said it, where and when, its scope). Use them "
           "if they help; `recall` finds more, `forget` removes one by id:")


def recalled_text(memories: Sequence[Memory], tokens: int) -> str | None:
    """The memories, best first, as one notice of at most about ``tokens`` tokens (one that
    does not fit is left out, the next may); None if none fits."""
    used = estimate_tokens(_HEADER)
    lines = []
    for memory in memories:
        line = f"- [{memory.id}] {memory.text} ({source_words(memory)}; {memory.scope.kind})"
        cost = estimate_tokens(line) + 1
        if used + cost <= tokens:
            lines.append(line)
            used += cost
    return "\n".join([_HEADER, *lines]) if lines else None
