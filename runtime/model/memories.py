"""Memories a team can trust: what each one says, whose it is (its scope), where it was
learned (its provenance), and the one place that decides who sees it and who may write it.

A memory's **scope** says which conversations it is for; its **provenance** says who said
it, where and when. Recall happens in a conversation (``Here``); ``visible`` decides, with
no I/O, whether a memory may be shown there. Its rules, in order (the first that fails
hides the memory):

=====  =====================================  ==========================================
 step   the memory                            is visible in ``here`` only if
=====  =====================================  ==========================================
 1      has ``expires_at``                    ``here.at < expires_at``
 2      was learned in a private place (a DM  ``here`` is in that place: same channel
        or a private channel:                 and that place is ``here.place`` or one of
        ``provenance.private``)               ``here.within`` (a thread of the place is
                                              the place); learned privately with no
                                              place (CLI, HTTP): ``here`` is that thread
 3      scope ``thread``                      ``here.thread_id`` is the scope's thread
 3      scope ``place``                       same channel, and the scope's place is
                                              ``here.place`` or one of ``here.within``
 3      scope ``person``                      the person is in ``here.people``
 3      scope ``agent``                       ``here.agent`` is the scope's agent
 3      scope ``workspace``                   always (every conversation of this maiden)
=====  =====================================  ==========================================

So a workspace memory learned in a public place is visible everywhere; one learned in a
DM or a private channel is confined to that place like any other memory learned there,
whatever its scope says. A place's privacy is a fact of where it was *learned*, which the
scope cannot widen. Only an agent-scoped memory is tied to an agent: the others are shared
by every agent in the conversations they cover.

Who may **write** a scope (``write_refusal``; ``Writer`` holds the writer's rights and
what the agent's config allows); the first row that applies refuses:

=========  ===========================================================================
 scope      refused when
=========  ===========================================================================
 any        its kind is not among the scopes the agent's config allows
 workspace  the writer lacks the ``operate`` right
 thread     it is not the thread learned in, unless the writer has ``operate`` and the
            source is not private (a private source is confined to its own thread's place)
 place      it is not the place learned in (channel and id), unless the writer has
            ``operate`` and neither the source nor the place is private
 person     it is not the writer (``provenance.user``), unless the writer has ``operate``
 agent      it is not the writing agent, unless the writer has ``operate``
=========  ===========================================================================

``cover`` and ``scope_key``/``confinement`` give the stores a coarse filter (the scope
keys that could cover a conversation, and the private places it is in) so a search reads
little more than what is visible; ``visible`` is still applied to what they return.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_MEMORY_CHARS", "OPERATE", "SCOPE_KINDS", "AgentScope", "Cover", "Here",
           "Listing", "Memory", "MemoryCall", "MemoryScope", "PersonScope", "PlaceScope",
           "Provenance", "ScopeKind", "ThreadScope", "WorkspaceScope", "Writer", "confinement",
           "cover", "kind_prefix", "kinds", "listed", "memory_id", "place_key", "scope_key",
           "visible", "words", "write_refusal"]

MAX_MEMORY_CHARS = 2_000
"""A memory is a short statement, not a document."""

OPERATE = "operate"
"""The right (``channels.access``) that a workspace memory, and writing beyond one's own
thread, place or person, needs."""

ScopeKind = Literal["thread", "place", "person", "agent", "workspace"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("thread", "place", "person", "agent", "workspace")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ThreadScope(_Model):
    """This thread: one conversation."""

    kind: Literal["thread"] = "thread"
    thread_id: str


class PlaceScope(_Model):
    """This place: a Slack or Discord channel, or a DM (``private`` for a DM or a private
    channel), named by its channel (``slack``, ``discord``) and the platform's id."""

    kind: Literal["place"] = "place"
    channel: str
    place: str
    private: bool = False


class PersonScope(_Model):
    """This person, by platform user id (``slack:U123``)."""

    kind: Literal["person"] = "person"
    user: str


class AgentScope(_Model):
    """This agent (its name), in every conversation it has."""

    kind: Literal["agent"] = "agent"
    agent: str


class WorkspaceScope(_Model):
    """The whole workspace: every conversation this maiden has."""

    kind: Literal["workspace"] = "workspace"


MemoryScope = Annotated[ThreadScope | PlaceScope | PersonScope | AgentScope | WorkspaceScope,
                        Field(discriminator="kind")]


class Provenance(_Model):
    """Where a memory came from: who said it, where, in which thread and run, and when."""

    user: str | None = None
    """The platform user id of who said it (``slack:U123``); None when unknown."""
    user_name: str | None = None
    """Their display name, when known."""
    channel: str = "cli"
    """The channel it was said on (``slack``, ``discord``, ``http``, ``cli``, ...)."""
    place: str | None = None
    """The platform's id of the place (a channel, a DM); None where there is none."""
    private: bool = False
    """Said in a DM or a private channel: then recalled nowhere else (``visible``)."""
    thread_id: str
    run_id: str | None = None
    message: str | None = None
    """The platform's reference of the message it came from, when there is one."""
    via: str | None = None
    """How it was kept when no one said it as such: ``memory flush`` for a statement the
    model chose, before a compaction, from what fell out of the window."""
    at: float


class Memory(_Model):
    """One thing a team's agent remembers."""

    id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    scope: MemoryScope
    provenance: Provenance
    expires_at: float | None = None
    created_at: float
    updated_at: float
    edited_by: str | None = None
    """Who last edited its text (a user id); None if never edited."""


class MemoryCall(_Model):
    """A call that put or deleted a memory, by its idempotency key: kept so that the call,
    re-run after a crash, changes nothing more (as ``NoteCall`` for notes)."""

    call: str
    memory_id: str
    forget: bool = False
    existed: bool = False
    """For a delete: whether there was a memory to remove (what a re-run answers)."""


class Here(_Model):
    """The conversation a recall happens in, at a moment."""

    channel: str
    place: str | None = None
    """The platform's id of the place (most specific: a Discord thread's own channel)."""
    within: tuple[str, ...] = ()
    """The places that hold it (a Discord thread's parent channel, its guild)."""
    private: bool = False
    """A DM or a private channel: what a memory learned here records (``Provenance``);
    ``visible`` reads where a memory was learned, not where it is recalled."""
    thread_id: str
    agent: str
    people: frozenset[str] = frozenset()
    """The user ids of the people in the conversation."""
    at: float

    @property
    def places(self) -> tuple[str, ...]:
        """Its place and the places that hold it."""
        return (self.place, *self.within) if self.place is not None else self.within


class Writer(_Model):
    """Who writes a memory: the agent, the person's rights, the scopes the config allows."""

    agent: str
    rights: frozenset[str] = frozenset()
    allowed: frozenset[ScopeKind] = frozenset(SCOPE_KINDS)



def visible(memory: Memory, here: Here) -> bool:
    """Whether ``memory`` may be recalled in ``here`` (the module's first table)."""
    if memory.expires_at is not None and here.at >= memory.expires_at:
        return False
    source = memory.provenance
    if source.private and not _in_source_place(source, here):
        return False
    scope = memory.scope
    match scope:
        case ThreadScope():
            return here.thread_id == scope.thread_id
        case PlaceScope():
            return here.channel == scope.channel and scope.place in here.places
        case PersonScope():
            return scope.user in here.people
        case AgentScope():
            return here.agent == scope.agent
        case WorkspaceScope():
            return True


def _in_source_place(source: Provenance, here: Here) -> bool:
    if source.place is None:
        return here.thread_id == source.thread_id
    return here.channel == source.channel and source.place in here.places


def write_refusal(scope: MemoryScope, source: Provenance, writer: Writer) -> str | None:
    """Why ``writer`` may not write a memory of ``scope`` learned at ``source``, or None if
    it may (the module's second table)."""
    if scope.kind not in writer.allowed:
        allowed = ", ".join(k for k in SCOPE_KINDS if k in writer.allowed) or "none"
        return (f"this agent's config does not allow {scope.kind} memories "
                f"(it allows: {allowed})")
    operate = OPERATE in writer.rights
    match scope:
        case WorkspaceScope():
            if not operate:
                return "a workspace memory needs the operate right"
        case ThreadScope():
            if scope.thread_id != source.thread_id and (source.private or not operate):
                return ("a thread memory is kept in the thread it is learned in"
                        + ("" if source.private else " (another thread needs operate)"))
        case PlaceScope():
            here = scope.channel == source.channel and scope.place == source.place
            if not here and (source.private or scope.private or not operate):
                return ("a place memory is kept in the place it is learned in"
                        + (" (a private place's, only there)" if source.private
                           or scope.private else " (another place needs operate)"))
        case PersonScope():
            if scope.user != source.user and not operate:
                return ("a person's memory is written by that person "
                        "(another's needs operate)")
        case AgentScope():
            if scope.agent != writer.agent and not operate:
                return "an agent's memory is written by that agent (another's needs operate)"
    return None


# -- the stores' coarse filter


def _key(*parts: str) -> str:
    """An injective key: the parts as a compact JSON array."""
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def place_key(channel: str, place: str) -> str:
    return _key("place", channel, place)


def scope_key(scope: MemoryScope) -> str:
    """The key a store files a memory of ``scope`` under (and filters by)."""
    match scope:
        case ThreadScope():
            return _key("thread", scope.thread_id)
        case PlaceScope():
            return place_key(scope.channel, scope.place)
        case PersonScope():
            return _key("person", scope.user)
        case AgentScope():
            return _key("agent", scope.agent)
        case WorkspaceScope():
            return _key("workspace")


def confinement(source: Provenance) -> str | None:
    """The key of the place a memory learned there is confined to; None for a public one."""
    if not source.private:
        return None
    if source.place is None:
        return _key("thread", source.thread_id)
    return place_key(source.channel, source.place)


class Cover(_Model):
    """A store's coarse filter for a conversation: memories filed under one of ``scopes``,
    confined nowhere or to one of ``places``, and not expired by ``at``."""

    scopes: tuple[str, ...]
    places: tuple[str, ...]
    at: float


def cover(here: Here) -> Cover:
    """The coarse filter of ``here``: every scope key that could cover it (its thread, its
    places, its people, its agent, the workspace) and the places it is in."""
    places = tuple(place_key(here.channel, p) for p in here.places)
    thread = _key("thread", here.thread_id)
    scopes = (thread, *places, *(_key("person", u) for u in sorted(here.people)),
              _key("agent", here.agent), _key("workspace"))
    return Cover(scopes=scopes, places=(*places, thread), at=here.at)


class Listing(_Model):
    """A list of memories that is not one conversation's recall (the HTTP API, the console,
    the CLI), newest first: those holding a word of ``query`` (all, for none), and of each
    filter given: one scope kind, one thread (learned in it or kept for it), some people
    (said by one of them, or a person memory about one: the names one caller goes by, say
    ``http:ci-bot`` and ``console:ci-bot``), not expired at ``at``."""

    query: str = ""
    kind: ScopeKind | None = None
    thread_id: str | None = None
    people: tuple[str, ...] | None = None
    """None: anyone's; ``()``: no one's (an empty list)."""
    at: float | None = None


def kind_prefix(kind: ScopeKind) -> str:
    """What every ``scope_key`` of ``kind`` starts with (``["place"``)."""
    return _key(kind)[:-1]


def listed(memory: Memory, listing: Listing) -> bool:
    """Whether ``memory`` passes the filters of ``listing`` (its query aside)."""
    scope = memory.scope
    if listing.kind is not None and scope.kind != listing.kind:
        return False
    if listing.thread_id is not None and memory.provenance.thread_id != listing.thread_id \
            and scope != ThreadScope(thread_id=listing.thread_id):
        return False
    if listing.people is not None and memory.provenance.user not in listing.people \
            and not (isinstance(scope, PersonScope) and scope.user in listing.people):
        return False
    return listing.at is None or memory.expires_at is None or memory.expires_at > listing.at


def memory_id(call: str | None) -> str:
    """A new memory's id: derived from the call's idempotency key when there is one (a call
    re-run names the same memory), else random."""
    if call is None:
        return f"m{uuid.uuid4().hex}"
    return f"m{hashlib.sha256(f'memory {call}'.encode()).hexdigest()[:32]}"


def words(query: str) -> list[str]:
    """The words of a search, casefolded (what the files store matches, and what the SQL
    stores' queries are built of: no operator of theirs can hide in one)."""
    return re.findall(r"\w+", query.casefold())



def kinds(scopes: Collection[str]) -> frozenset[ScopeKind]:
    """The scope kinds among ``scopes`` (a config's list), ``ValueError`` for another."""
    unknown = sorted(set(scopes) - set(SCOPE_KINDS))
    if unknown:
        raise ValueError(f"unknown memory scopes {unknown}: use {', '.join(SCOPE_KINDS)}")
    return frozenset(k for k in SCOPE_KINDS if k in scopes)

