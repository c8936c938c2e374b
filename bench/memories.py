"""Workload 15: memories. (a) How long a recall takes with 100,000 memories on SQLite
(the FTS5 search, whose MATCH holds the conversation's scope keys, through its coarse
filter, then ``visible``: what each new message's prelude and each ``recall`` call
costs), against the same recall over 1,000 memories in the same run. (b) How well it
finds what was planted: 30 facts about a fictional team, kept as place memories in
threads of the team's channel among the many, asked about from other threads of that
channel: recall@5, the share of questions whose fact is among the 5 recalled.

The many are written in bulk (one transaction, the store's own row writer, ``_put``): a
benchmark of reading, not of 100,000 fsyncs. They are spread over 20 channels, 2,000
threads and 500 people, in every scope, their words drawn from a team's vocabulary so
that the questions' words are common in them too.
"""

from __future__ import annotations

import random
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from runtime import SQLiteStore
from runtime.model.memories import (
    Here,
    Memory,
    MemoryScope,
    PersonScope,
    PlaceScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    Writer,
    memory_id,
)
from runtime.serving.memories import Memories
from runtime.stores.sqlite.memories import _put

from .table import Row, verdict

__all__ = ["FACTS", "MemoriesResult", "memories_rows", "run_memories"]

BASELINE = 1_000
"""The memories of the baseline's store."""
TARGET_MS = 5.0
LIMIT = 5
"""Memories recalled per message (``[tools.memory] recall_limit``'s default)."""
PLACES = 20
THREADS = 2_000
PEOPLE = 500
TEAM = "C00"
"""The team's channel, where the facts are planted and asked about."""

FACTS: tuple[tuple[str, str], ...] = (
    ("The staging database is db-7", "which database does staging use?"),
    ("Deploys to production happen on Tuesdays and Thursdays", "when do we deploy to prod?"),
    ("Ana owns the billing service", "who is the owner of billing?"),
    ("The on-call rotation changes every Monday at 10:00", "when does on-call rotate?"),
    ("The design review meeting is in room Orion", "where is the design review held?"),
    ("Our API rate limit is 600 requests per minute", "what is the api rate limit?"),
    ("The mobile app release is frozen until the 14th", "until when is the app release frozen?"),
    ("Bob is the contact at the payments vendor Stripe", "who talks to stripe for us?"),
    ("Backups of the main cluster run at 02:00 UTC", "what time do cluster backups run?"),
    ("The VPN gateway is vpn.example.internal", "what's the vpn gateway address?"),
    ("Customer support escalations go to the #support-l2 channel",
     "where do support escalations go?"),
    ("The quarterly planning offsite is in Lisbon", "where is the planning offsite?"),
    ("Feature flags are managed in LaunchDarkly", "what do we use for feature flags?"),
    ("The search index is rebuilt nightly by the reindex job",
     "how often is the search index rebuilt?"),
    ("Chen is on parental leave until March", "is chen away?"),
    ("The staging environment resets every Sunday night", "when does staging get reset?"),
    ("Invoices are sent on the first business day of the month",
     "when do invoices go out?"),
    ("The GPU budget for the ML team is 40,000 dollars a quarter",
     "how much gpu budget does ml have?"),
    ("The legacy monolith runs on Java 11", "which java version does the monolith use?"),
    ("Security reviews are requested through the SEC Jira project",
     "how do I request a security review?"),
    ("The company all-hands is every other Friday at 16:00", "when is all-hands?"),
    ("Dana is the tech lead of the data platform", "who leads data platform?"),
    ("Postgres major upgrades need a two week notice", "how much notice for a postgres upgrade?"),
    ("The analytics warehouse is BigQuery", "which warehouse do we use for analytics?"),
    ("New laptops are ordered through the IT portal", "how do I get a new laptop?"),
    ("The docs site is built with MkDocs", "what builds the docs site?"),
    ("Eve handles vendor contracts", "who deals with contracts with vendors?"),
    ("The Kafka cluster has 12 brokers", "how many kafka brokers are there?"),
    ("Code freeze for the holidays starts December 18", "when does the holiday code freeze begin?"),
    ("The incident postmortem template lives in Notion", "where is the postmortem template?"),
)
"""Each fact, and a question about it in other words (some shared, as people ask)."""

_WORDS = (
    "database", "deploy", "release", "service", "meeting", "budget", "owner", "team",
    "staging", "production", "cluster", "backup", "review", "vendor", "contract",
    "incident", "support", "search", "index", "api", "limit", "room", "laptop", "docs",
    "kafka", "postgres", "warehouse", "flag", "security", "freeze", "rotation", "app",
    "mobile", "planning", "invoice", "customer", "data", "platform", "lead", "plan",
    "job", "nightly", "weekly", "friday", "monday", "tuesday", "dashboard", "alert",
    "metric", "queue", "cache", "migration", "schema", "ticket", "sprint", "roadmap",
    "design", "feedback", "onboarding", "access", "token", "key", "secret", "network",
    "dns", "gateway", "certificate", "latency", "storage", "bucket", "region", "cost",
    "report")
_NAMES = (
    "ana", "bob", "chen", "dana", "eve", "finn", "gus", "hana", "ivan", "jo", "kai",
    "lea", "max", "nia", "omar", "pia", "quin", "rui", "sam", "tao", "uma", "vic", "wen",
    "xia", "yuri", "zoe")


@dataclass
class MemoriesResult:
    memories: int
    planted_s: float
    timings_ms: dict[int, list[float]] = field(default_factory=dict)
    """Per store size (memories), each recall's time."""
    found: int = 0
    """Questions whose fact was among the ``LIMIT`` recalled."""


_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday")


def _text(rng: random.Random) -> str:
    """A short statement as people keep them (a third or so hold "the", as in English)."""
    a, b, c = rng.sample(_WORDS, 3)
    name, day, value = rng.choice(_NAMES), rng.choice(_DAYS), f"{c}-{rng.randint(1, 99)}"
    match rng.randrange(4):
        case 0:
            return f"The {a} {b} of {name} is {value}"
        case 1:
            return f"{name.title()} prefers {a} {b} on {day}"
        case 2:
            return f"{a.title()} {b} moved to {value} last {day}"
        case _:
            return f"Ask {name} about {a} {b} before {day}"


def _scope(rng: random.Random, thread: str, place: str, user: str) -> MemoryScope:
    pick = rng.random()
    if pick < 0.40:
        return ThreadScope(thread_id=thread)
    if pick < 0.75:
        return PlaceScope(channel="slack", place=place)
    if pick < 0.95:
        return PersonScope(user=user)
    return WorkspaceScope()


def _many(n: int, seed: int) -> list[Memory]:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        t = rng.randrange(THREADS)
        place, thread = f"C{t % PLACES:02d}", f"slack:C{t % PLACES:02d}:{t}"
        user = f"slack:U{rng.randrange(PEOPLE)}"
        at = 1.7e9 + i
        source = Provenance(user=user, channel="slack", place=place, thread_id=thread,
                            run_id=f"r{i}", at=at)
        made.append(Memory(id=memory_id(f"bench {seed} {i}"), text=_text(rng),
                           scope=_scope(rng, thread, place, user), provenance=source,
                           created_at=at, updated_at=at))
    return made


async def _plant(db: Path, n: int) -> float:
    """``n`` memories written in one transaction; the seconds it took."""
    async with SQLiteStore(db, synchronous="off"):
        pass  # the schema
    many = _many(n, seed=n)
    began = time.perf_counter()
    with sqlite3.connect(db) as conn:
        for memory in many:
            _put(conn, memory, None)
    conn.close()
    return time.perf_counter() - began


def _here(rng: random.Random, at: float) -> Here:
    """A conversation in one of the team's threads (not one the facts were planted in)."""
    t = PLACES * rng.randrange(THREADS // PLACES)
    return Here(channel="slack", place=TEAM, thread_id=f"slack:{TEAM}:ask{t}", agent="default",
                people=frozenset(f"slack:U{rng.randrange(PEOPLE)}" for _ in range(3)), at=at)


def _queries(count: int) -> list[str]:
    rng = random.Random(7)
    asked = [q for _, q in FACTS]
    for _ in range(count - len(asked)):
        words = rng.sample(_WORDS, 2)
        asked.append(f"what is the {words[0]} {words[1]} of {rng.choice(_NAMES)}?")
    return asked[:count]


async def _time(db: Path, queries: list[str]) -> list[float]:
    rng = random.Random(11)
    timings = []
    async with SQLiteStore(db) as store:
        memories = Memories(store, clock=time.time)
        for query in queries:
            here = _here(rng, time.time())
            began = time.perf_counter()
            await memories.recall(query, here, LIMIT)
            timings.append((time.perf_counter() - began) * 1000)
    return timings


async def _quality(db: Path) -> int:
    """Plant the facts (each in a thread of the team's channel, as place memories, through
    ``Memories.remember``), then ask each from another thread there: how many are found."""
    rng = random.Random(3)
    async with SQLiteStore(db) as store:
        memories = Memories(store, clock=time.time)
        kept = {}
        for i, (fact, _) in enumerate(FACTS):
            source = Provenance(user=f"slack:U{i}", channel="slack", place=TEAM,
                                thread_id=f"slack:{TEAM}:fact{i}", run_id=f"f{i}",
                                at=time.time())
            made = await memories.remember(fact, PlaceScope(channel="slack", place=TEAM),
                                           source, Writer(agent="default"), call=f"fact {i}")
            assert made is not None
            kept[i] = made.id
        found = 0
        for i, (_, question) in enumerate(FACTS):
            recalled = await memories.recall(question, _here(rng, time.time()), LIMIT)
            found += kept[i] in [m.id for m in recalled]
    return found


async def run_memories(workdir: Path, n: int, queries: int) -> MemoriesResult:
    """Plant ``n`` memories (and ``BASELINE`` in a store of their own), time ``queries``
    recalls in each, then plant and ask the facts in the larger."""
    asked = _queries(queries)
    result = MemoriesResult(memories=n, planted_s=0.0)
    for size in (BASELINE, n):
        db = workdir / f"memories-{size}.db"
        db.unlink(missing_ok=True)
        took = await _plant(db, size)
        if size == n:
            result.planted_s = took
        await _time(db, asked[:10])  # warm the page cache as a running maiden's is
        result.timings_ms[size] = await _time(db, asked)
    result.found = await _quality(workdir / f"memories-{n}.db")
    return result


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def memories_rows(r: MemoriesResult) -> list[Row]:
    name = f"15 memories, {r.memories:,} on SQLite"
    big, small = r.timings_ms[r.memories], r.timings_ms[BASELINE]
    rows = []
    for label, q in (("median", 0.5), ("p95", 0.95)):
        value, base = _quantile(big, q), _quantile(small, q)
        rows.append(Row(name, f"ms a recall ({LIMIT} for a message, {len(big)} questions), "
                    f"{label} (baseline: {BASELINE:,} memories)", f"{value:.2f}",
                    f"{base:.2f}", f"{value / base:.2f}x", f"< {TARGET_MS:g} ms",
                    verdict(value, at_most=TARGET_MS),
                    why="bm25 costs microseconds a row it ranks: the few hundred "
                    "memories of the conversation's scopes holding a rarer word of the "
                    "question (a fixed cost too: the scope keys' and words' lists of rows "
                    "read whole; bench/README.md)"))
    rows.append(Row(name, "memories planted a second (bulk, one transaction)",
                    f"{r.memories / r.planted_s:,.0f}"))
    rows.append(Row(name, f"recall@{LIMIT}: {len(FACTS)} facts planted in threads of a "
                    "channel, asked from others", f"{r.found / len(FACTS):.2f}",
                    target="report"))
    return rows
