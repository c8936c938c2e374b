"""How many memories hold each word (the schema's ``memory_words``), kept by the writes that
change a memory's text, so that a search knows at once which of its words are common.

A recall's question is a message, full of words most memories hold (``the``, ``is``): each
is a long list of rows in the full-text index, and ranking every row that holds one costs
more than everything else a recall does. The counts let a search rank first by its rarer
words alone (``SQLiteMemories.search_memories``). They are only ever a hint: a word counted
wrong makes a search slower or its order a little different, never shows a memory the
conversation may not see. A word is counted as ``model.memories.words`` splits it (the
index stems it too, so a count can only be below the index's: a hint on the safe side).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from ...model.memories import words

__all__ = ["ALL", "count_words", "counted", "fill_words"]

ALL = ""
"""The row counting every memory (no word is empty)."""


def count_words(db: sqlite3.Connection, gone: str | None, kept: str | None) -> None:
    """A memory's text changes from ``gone`` (None: it is new) to ``kept`` (None: it goes),
    in the caller's transaction. A word no memory holds any more loses its row, so that an
    erased memory leaves none of its words here."""
    before, after = set(words(gone or "")), set(words(kept or ""))
    changes = Counter(dict.fromkeys(after - before, 1))
    changes.subtract(dict.fromkeys(before - after, 1))
    changes[ALL] = (kept is not None) - (gone is not None)
    _add(db, {word: n for word, n in changes.items() if n})


def fill_words(db: sqlite3.Connection) -> None:
    """Count the words of every memory (a database from before the counts)."""
    db.execute("DELETE FROM memory_words")
    counts: Counter[str] = Counter()
    for (text,) in db.execute("SELECT text FROM memories"):
        counts.update(set(words(text)))
        counts[ALL] += 1
    _add(db, counts)


def counted(db: sqlite3.Connection, found: list[str]) -> tuple[dict[str, int], int]:
    """How many memories hold each of ``found`` (a word none holds is not a key), and how
    many there are."""
    rows = db.execute("SELECT word, memories FROM memory_words "
                      "WHERE word IN (SELECT value FROM json_each(?))",
                      (json.dumps([ALL, *found]),))
    counts = dict(rows.fetchall())
    return counts, counts.pop(ALL, 0)


def _add(db: sqlite3.Connection, changes: dict[str, int]) -> None:
    db.executemany("INSERT INTO memory_words (word, memories) VALUES (?, ?) "
                   "ON CONFLICT (word) DO UPDATE SET memories = memories + excluded.memories",
                   changes.items())
    fewer = [word for word, n in changes.items() if n < 0]
    if fewer:
        db.execute("DELETE FROM memory_words WHERE word IN (SELECT value FROM json_each(?)) "
                   "AND memories <= 0", (json.dumps(fewer),))
