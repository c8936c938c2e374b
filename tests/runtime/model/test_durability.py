"""The one rule of what is written when (``runtime/model/durability.py``), as a table. (That the
docs' Durability page prints the table: tests/docs/test_pages.py.)"""

from __future__ import annotations

import pytest

from runtime.model.durability import Write, durability

# (kind, effect, sends) -> fsynced. Every write commits.
RULE = [
    (Write.ACCEPT, False, False, True),
    (Write.START, False, False, False),
    (Write.START, False, True, True),
    (Write.RESUME, False, False, False),
    (Write.NOTICE, False, False, False),
    (Write.INTENT, False, False, False),
    (Write.INTENT, True, False, True),
    (Write.CLAIM, True, False, True),
    (Write.RESULT, False, False, False),
    (Write.RESULT, True, False, True),
    (Write.PAUSE, False, True, True),
    (Write.PAUSE, False, False, True),
    (Write.ANSWER, False, True, True),
    (Write.END, False, True, True),
    (Write.END, False, False, True),
    (Write.RELEASE, False, False, True),
]


@pytest.mark.parametrize(("kind", "effect", "sends", "fsync"), RULE)
def test_what_is_committed_and_what_is_flushed(
        kind: Write, effect: bool, sends: bool, fsync: bool) -> None:
    made = durability(kind, effect=effect, sends=sends)
    assert made.commit
    assert made.fsync is fsync
    assert made.why


def test_every_kind_of_write_is_in_the_table() -> None:
    assert {kind for kind, *_ in RULE} == set(Write)


def test_the_standard_message_is_two_flushes() -> None:
    """A message, one read-only call, an answer: the accept and the answer are flushed."""
    writes = [Write.ACCEPT, Write.START, Write.INTENT, Write.RESULT, Write.ANSWER]
    flushed = [w for w in writes if durability(w).fsync]
    assert flushed == [Write.ACCEPT, Write.ANSWER]
