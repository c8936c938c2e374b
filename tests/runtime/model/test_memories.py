"""Memories' privacy (``runtime.model.memories``): who sees a memory where, and who may
write a scope, as tables; then a property over random worlds, checked against an oracle
that enumerates the conversations each memory covers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.model.memories import (
    AgentScope,
    Here,
    Memory,
    MemoryScope,
    PersonScope,
    PlaceScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    Writer,
    confinement,
    cover,
    kinds,
    memory_id,
    scope_key,
    visible,
    write_refusal,
)

NOW = 1000.0
ALICE, BOB = "slack:UALICE", "slack:UBOB"


def said(*, channel: str = "slack", place: str | None = "CPUB", private: bool = False,
         thread: str = "t-pub", user: str | None = ALICE) -> Provenance:
    return Provenance(user=user, user_name="Alice", channel=channel, place=place,
                      private=private, thread_id=thread, run_id="r1", at=NOW - 100)


def memory(scope: MemoryScope, source: Provenance | None = None,
           expires_at: float | None = None) -> Memory:
    return Memory(id="m1", text="the standup is at 9:15", scope=scope,
                  provenance=source or said(), expires_at=expires_at,
                  created_at=NOW - 100, updated_at=NOW - 100)


def here(*, channel: str = "slack", place: str | None = "CPUB", within: tuple[str, ...] = (),
         thread: str = "t-pub", agent: str = "main", people: frozenset[str] = frozenset({ALICE}),
         at: float = NOW) -> Here:
    return Here(channel=channel, place=place, within=within, thread_id=thread, agent=agent,
                people=people, at=at)


PRIV = said(place="GPRIV", private=True, thread="t-priv")
DM = said(place="DALICE", private=True, thread="t-dm")
CLI_PRIVATE = said(channel="cli", place=None, private=True, thread="t-cli")

VISIBLE: list[tuple[Memory, Here, bool]] = [
    # -- expiry
    (memory(WorkspaceScope(), expires_at=NOW + 1), here(), True),  # not expired yet
    (memory(WorkspaceScope(), expires_at=NOW), here(), False),  # expires at this instant
    (memory(WorkspaceScope(), expires_at=NOW - 1), here(), False),  # expired
    # -- thread
    (memory(ThreadScope(thread_id="t-pub")), here(), True),  # the same thread
    (memory(ThreadScope(thread_id="t-pub")), here(thread="t-other"), False),  # another one
    # -- place
    (memory(PlaceScope(channel="slack", place="CPUB")), here(thread="t-2"), True),  # same
    (memory(PlaceScope(channel="slack", place="CPUB")), here(place="COTHER"), False),
    # the same id on another platform is another place
    (memory(PlaceScope(channel="slack", place="CPUB")), here(channel="discord"), False),
    # a Discord thread inside the place is in the place
    (memory(PlaceScope(channel="discord", place="100"), said(channel="discord", place="100")),
     here(channel="discord", place="555", within=("100", "900")), True),
    # a place memory is not visible in the thread's parent, only in what it holds
    (memory(PlaceScope(channel="discord", place="555"), said(channel="discord", place="555")),
     here(channel="discord", place="100", within=("900",)), False),
    # -- person
    (memory(PersonScope(user=ALICE)), here(people=frozenset({ALICE, BOB})), True),
    (memory(PersonScope(user=ALICE)), here(people=frozenset({BOB})), False),  # not there
    (memory(PersonScope(user=ALICE)), here(people=frozenset()), False),  # nobody (a schedule)
    # -- agent
    (memory(AgentScope(agent="main")), here(agent="main", place="CX", thread="t-x"), True),
    (memory(AgentScope(agent="main")), here(agent="ops"), False),  # another agent's talk
    # -- workspace
    (memory(WorkspaceScope()), here(channel="discord", place="77", thread="t-d"), True),
    (memory(WorkspaceScope()), here(channel="cli", place=None, thread="t-c"), True),
    # -- learned in a private channel: confined to it, whatever the scope
    (memory(WorkspaceScope(), PRIV), here(place="GPRIV", thread="t-priv-2"), True),
    (memory(WorkspaceScope(), PRIV), here(), False),  # the public channel
    (memory(PersonScope(user=ALICE), PRIV), here(people=frozenset({ALICE})), False),
    (memory(PersonScope(user=ALICE), PRIV), here(place="GPRIV"), True),  # there, with her
    (memory(AgentScope(agent="main"), PRIV), here(place="CPUB"), False),
    (memory(ThreadScope(thread_id="t-priv"), PRIV), here(place="GPRIV", thread="t-priv"),
     True),
    # the same thread id seen from another place is not the private place
    (memory(ThreadScope(thread_id="t-priv"), PRIV), here(place="CPUB", thread="t-priv"),
     False),
    # a thread inside the private place (Discord: its parent) is the same place
    (memory(WorkspaceScope(), said(channel="discord", place="300", private=True)),
     here(channel="discord", place="301", within=("300", "900")), True),
    # a private thread inside a public channel confines to the thread, not the channel
    (memory(WorkspaceScope(), said(channel="discord", place="301", private=True)),
     here(channel="discord", place="300", within=("900",)), False),
    # -- learned in a DM: only in that DM
    (memory(PersonScope(user=ALICE), DM), here(place="DALICE", thread="t-dm"), True),
    (memory(PersonScope(user=ALICE), DM), here(place="DBOB", thread="t-dm2"), False),
    (memory(WorkspaceScope(), DM), here(place="CPUB"), False),
    # a DM with the same id on another platform is another place
    (memory(WorkspaceScope(), DM), here(channel="discord", place="DALICE"), False),
    # -- learned privately where there is no place (CLI, HTTP): only in its thread
    (memory(WorkspaceScope(), CLI_PRIVATE), here(channel="cli", place=None, thread="t-cli"),
     True),
    (memory(WorkspaceScope(), CLI_PRIVATE), here(channel="cli", place=None, thread="t-2"),
     False),
]


@pytest.mark.parametrize(("found", "where", "seen"), VISIBLE)
def test_visible(found: Memory, where: Here, seen: bool) -> None:
    assert visible(found, where) is seen


OPS = Writer(agent="main", rights=frozenset({"talk", "operate"}))
TALKER = Writer(agent="main", rights=frozenset({"talk"}))
THREADS_ONLY = Writer(agent="main", rights=frozenset({"operate"}), allowed=kinds(["thread"]))

WRITES: list[tuple[MemoryScope, Provenance, Writer, str | None]] = [
    # the config's scopes come first, whatever the rights
    (PlaceScope(channel="slack", place="CPUB"), said(), THREADS_ONLY, "does not allow place"),
    (ThreadScope(thread_id="t-pub"), said(), THREADS_ONLY, None),
    # workspace: operate only
    (WorkspaceScope(), said(), TALKER, "needs the operate right"),
    (WorkspaceScope(), said(), OPS, None),
    (WorkspaceScope(), DM, OPS, None),  # allowed, and confined to the DM by visible
    # thread: this one; another with operate, never from a private place
    (ThreadScope(thread_id="t-pub"), said(), TALKER, None),
    (ThreadScope(thread_id="t-x"), said(), TALKER, "another thread needs operate"),
    (ThreadScope(thread_id="t-x"), said(), OPS, None),
    (ThreadScope(thread_id="t-x"), PRIV, OPS, "kept in the thread it is learned in"),
    # place: this one; another public one with operate
    (PlaceScope(channel="slack", place="CPUB"), said(), TALKER, None),
    (PlaceScope(channel="slack", place="DALICE", private=True), DM, TALKER, None),
    (PlaceScope(channel="slack", place="COTHER"), said(), TALKER, "another place needs"),
    (PlaceScope(channel="discord", place="CPUB"), said(), TALKER, "another place needs"),
    (PlaceScope(channel="slack", place="COTHER"), said(), OPS, None),
    # a private source could never show it elsewhere; nor is a private place written from out
    (PlaceScope(channel="slack", place="COTHER"), DM, OPS, "a private place's, only there"),
    (PlaceScope(channel="slack", place="GPRIV", private=True), said(), OPS, "only there"),
    # person: oneself; another with operate
    (PersonScope(user=ALICE), said(), TALKER, None),
    (PersonScope(user=BOB), said(), TALKER, "written by that person"),
    (PersonScope(user=ALICE), said(user=None), TALKER, "written by that person"),
    (PersonScope(user=BOB), said(), OPS, None),
    # agent: the writing agent; another with operate
    (AgentScope(agent="main"), said(), TALKER, None),
    (AgentScope(agent="ops"), said(), TALKER, "written by that agent"),
    (AgentScope(agent="ops"), said(), OPS, None),
]


@pytest.mark.parametrize(("scope", "source", "writer", "refused"), WRITES)
def test_write_refusal(scope: MemoryScope, source: Provenance, writer: Writer,
                       refused: str | None) -> None:
    why = write_refusal(scope, source, writer)
    if refused is None:
        assert why is None
    else:
        assert why is not None and refused in why


def test_kinds_refuses_an_unknown_scope() -> None:
    assert kinds(["agent", "thread"]) == {"thread", "agent"}
    with pytest.raises(ValueError, match="unknown memory scopes"):
        kinds(["thread", "team"])


def test_keys_are_injective_and_ids_follow_calls() -> None:
    scopes: list[MemoryScope] = [ThreadScope(thread_id="a:b"), PlaceScope(channel="a", place="b"),
                                 PlaceScope(channel="a:b", place=""), PersonScope(user="a:b"),
                                 AgentScope(agent="a:b"), WorkspaceScope()]
    assert len({scope_key(s) for s in scopes}) == len(scopes)
    assert memory_id("call-1") == memory_id("call-1") != memory_id("call-2")
    assert memory_id(None) != memory_id(None)


# -- the property: an oracle that enumerates what each memory covers


@dataclass(frozen=True)
class Place:
    channel: str
    id: str
    private: bool
    parent: str | None = None  # a Discord thread's channel


PLACES = [Place("slack", "C1", False), Place("slack", "G1", True), Place("slack", "D1", True),
          Place("discord", "C1", False), Place("discord", "100", False),
          Place("discord", "101", False, parent="100"), Place("discord", "102", True, "100"),
          Place("discord", "200", True), Place("discord", "201", False, parent="200"),
          Place("discord", "D1", True),
          Place("cli", "", False)]
"""A world: Slack's public and private channel and DM, Discord's channels with public and
private threads, a thread inside a private channel, a DM whose id is a Slack DM's, and the
CLI (no place)."""
THREADS = [(f"t{n}-{k}", place) for n, place in enumerate(PLACES) for k in range(2)]
"""Two threads in each place."""
PEOPLE = ["slack:U1", "slack:U2", "discord:9"]
AGENTS = ["main", "ops"]
TIMES = [10.0, 20.0, 30.0]


def holders(place: Place) -> list[Place]:
    """The place and the places that hold it."""
    parent = [p for p in PLACES if p.channel == place.channel and p.id == place.parent]
    return [place, *parent]


def conversation(thread: tuple[str, Place], agent: str, people: frozenset[str],
                 at: float) -> Here:
    tid, place = thread
    return Here(channel=place.channel, place=place.id or None,
                within=tuple(p.id for p in holders(place)[1:]), private=place.private,
                thread_id=tid, agent=agent, people=people, at=at)


def covered(found: Memory) -> set[tuple[str, str, frozenset[str], float]]:
    """Every conversation of the world (thread, agent, people, time) where the memory may
    be seen, built from what its scope names, then cut down to where it was learned."""
    everyone = [frozenset(c) for n in range(len(PEOPLE) + 1)
                for c in _combinations(PEOPLE, n)]
    threads: set[str]
    scope = found.scope
    if isinstance(scope, ThreadScope):
        threads = {scope.thread_id}
    elif isinstance(scope, PlaceScope):
        threads = {tid for tid, place in THREADS
                   if any((h.channel, h.id) == (scope.channel, scope.place)
                          for h in holders(place))}
    else:
        threads = {tid for tid, _ in THREADS}
    source = found.provenance
    if source.private:  # the threads of the place it was learned in, and no others
        mine = {tid for tid, place in THREADS
                if any((h.channel, h.id or None) == (source.channel, source.place)
                       for h in holders(place))} if source.place else {source.thread_id}
        threads &= mine
    agents = [scope.agent] if isinstance(scope, AgentScope) else AGENTS
    groups = [g for g in everyone if not isinstance(scope, PersonScope) or scope.user in g]
    times = [t for t in TIMES if found.expires_at is None or t < found.expires_at]
    return {(tid, agent, group, at) for tid in threads for agent in agents
            for group in groups for at in times}


def _combinations(items: list[str], n: int) -> list[tuple[str, ...]]:
    if n == 0:
        return [()]
    return [(items[i], *rest) for i in range(len(items))
            for rest in _combinations(items[i + 1:], n - 1)]


_thread = st.sampled_from(THREADS)


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    tid, place = draw(_thread)
    source = Provenance(user=draw(st.sampled_from([None, *PEOPLE])), channel=place.channel,
                        place=place.id or None, private=place.private, thread_id=tid, at=0.0)
    kind = draw(st.sampled_from(["thread", "place", "person", "agent", "workspace"]))
    scope: MemoryScope
    if kind == "thread":
        scope = ThreadScope(thread_id=draw(_thread)[0])
    elif kind == "place":
        other = draw(st.sampled_from([p for p in PLACES if p.id]))
        scope = PlaceScope(channel=other.channel, place=other.id, private=other.private)
    elif kind == "person":
        scope = PersonScope(user=draw(st.sampled_from(PEOPLE)))
    elif kind == "agent":
        scope = AgentScope(agent=draw(st.sampled_from(AGENTS)))
    else:
        scope = WorkspaceScope()
    expires = draw(st.sampled_from([None, *TIMES]))
    return Memory(id="m", text="x", scope=scope, provenance=source, expires_at=expires,
                  created_at=0.0, updated_at=0.0)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[tuple[str, Place], str, frozenset[str], float]:
    return (draw(_thread), draw(st.sampled_from(AGENTS)),
            frozenset(draw(st.sets(st.sampled_from(PEOPLE)))), draw(st.sampled_from(TIMES)))


@settings(max_examples=300, deadline=None)
@given(st.lists(memories(), min_size=1, max_size=8), st.lists(conversations(), min_size=1,
                                                              max_size=12))
def test_no_memory_is_seen_outside_what_it_covers(
        planted: list[Memory],
        talks: list[tuple[tuple[str, Place], str, frozenset[str], float]]) -> None:
    for found in planted:
        allowed = covered(found)
        for thread, agent, people, at in talks:
            where = conversation(thread, agent, people, at)
            seen = visible(found, where)
            assert seen == ((thread[0], agent, people, at) in allowed), (found, where)
            if seen and found.provenance.private:  # never outside the place it was said in
                source = found.provenance
                assert (where.channel == source.channel
                        and (source.place in where.places if source.place
                             else where.thread_id == source.thread_id))
            if seen:  # the stores' coarse filter lets every visible memory through
                filtered = cover(where)
                confined = confinement(found.provenance)
                assert scope_key(found.scope) in filtered.scopes
                assert confined is None or confined in filtered.places
