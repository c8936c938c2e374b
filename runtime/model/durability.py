"""What is written when: the one rule (DESIGN §3), as one pure function and its table.

1. *Commit every round before going on.* A run's start with its person's message, each
   assistant turn with its tool calls (write-ahead intent, for every effect class) and
   each tool result are committed before the loop takes its next step: before any tool
   of that turn runs, before the next model request. Nothing is held in memory to be
   written later. Such a commit may skip the fsync: it must survive a killed process
   (SQLite ``synchronous=NORMAL`` in WAL, PostgreSQL ``synchronous_commit=off``), not a
   power cut.
2. *Fsync before anything leaves the process that cannot be taken back*: before an
   inbound message is acknowledged, before a tool with an effect runs, before a reply,
   stream, upload or prompt is sent, and at every end or pause of a run.

Every write commits; ``durability`` says which are also flushed to disk. The docs'
Durability page prints ``table()``; ``tests/docs/test_pages.py`` holds it to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Durability", "Write", "durability", "table"]


class Write(StrEnum):
    """The kinds of write a run makes, in the order a message meets them."""

    ACCEPT = "accept"
    """An inbound message stored as a queued run (before anyone is told it was taken)."""
    START = "start"
    """A run's start: its person's message enters the thread, the run is running."""
    RESUME = "resume"
    """A run taken up again: recovered after a crash, continued after a clean stop, or
    resumed by a person."""
    NOTICE = "notice"
    """Something the runtime tells the model (the final-turn notice, a summary)."""
    INTENT = "intent"
    """An assistant turn with its tool calls, before any of them runs."""
    CLAIM = "claim"
    """A ``non_idempotent`` call claimed (and its approval used up) right before it runs."""
    RESULT = "result"
    """A tool call's result."""
    PAUSE = "pause"
    """The run waits for a person (its approval prompt in the same write)."""
    ANSWER = "answer"
    """The final answer with its outbox record."""
    END = "end"
    """Any other end: failed, cancelled, timed out, each with its notice to send."""
    RELEASE = "release"
    """Shutdown: the run is left at its checkpoint, nobody's."""


@dataclass(frozen=True, slots=True)
class Durability:
    """How one write reaches the store."""

    commit: bool
    """Committed before the loop goes on (always)."""
    fsync: bool
    """Flushed to disk before the write returns (a durable point)."""
    why: str
    """The rule that decides it, in a few words (for the docs' table)."""


_LEAVES = frozenset({Write.ACCEPT, Write.CLAIM, Write.PAUSE, Write.ANSWER, Write.END,
                     Write.RELEASE})
"""Writes after which something leaves the process, or that end or pause a run."""

_WHY = {
    Write.ACCEPT: "the message is acknowledged next",
    Write.START: "a power cut: the run starts again from its queued message",
    Write.RESUME: "a power cut loses only the count of recoveries",
    Write.NOTICE: "a power cut: made again before the next request",
    Write.INTENT: "a read-only turn lost to a power cut is asked again",
    Write.CLAIM: "the call's effect happens next",
    Write.RESULT: "a read-only result lost to a power cut is read again",
    Write.PAUSE: "the prompt is sent next",
    Write.ANSWER: "the reply is sent next",
    Write.END: "the run ends; its notice is sent next",
    Write.RELEASE: "the run stops here",
}


def durability(kind: Write, *, effect: bool = False, sends: bool = False) -> Durability:
    """How a write of ``kind`` is made: ``effect``, whether the turn or result is of a call
    that may change something outside the thread (``idempotent_write``,
    ``non_idempotent``); ``sends``, whether the write holds an outbox record sent next."""
    if kind in _LEAVES:
        return Durability(commit=True, fsync=True, why=_WHY[kind])
    if sends:
        return Durability(commit=True, fsync=True, why="what it records is sent next")
    if effect and kind in (Write.INTENT, Write.RESULT):
        why = "a tool with an effect runs next" if kind is Write.INTENT \
            else "the effect is never run again"
        return Durability(commit=True, fsync=True, why=why)
    return Durability(commit=True, fsync=False, why=_WHY[kind])


def table() -> list[tuple[str, Durability]]:
    """Every case ``durability`` tells apart, as the docs' Durability page prints it."""
    rows: list[tuple[str, Durability]] = []
    for kind in Write:
        rows.append((kind.value, durability(kind)))
        if kind in (Write.INTENT, Write.RESULT):
            rows.append((f"{kind.value}, a call with an effect", durability(kind, effect=True)))
        if kind is Write.START:
            rows.append((f"{kind.value}, with a notice to send", durability(kind, sends=True)))
    return rows
