"""A conversation's search of the SQLite store's memories (``search_memories``), on the
reading connection's thread.

Ranking (FTS5's ``bm25()``) costs a few microseconds a row it ranks, and reading a word's
list of rows costs in proportion to its length: ranking every memory that holds any word of
a question, as it once did, took 70 ms among 100,000 memories. So the MATCH holds the
conversation's scope keys as well as its words (the index's ``scope`` column: the keys in
hex), and the index ranks only the memories filed under one of them; and a question's
common words (``the``, ``is``: more than one memory in ``COMMON`` holds them, by
``memory_words``) do not choose what is ranked when rarer words are there to: the index
ranks those holding a rarer word by the rarer words, and each common word such a memory holds
adds what bm25 would give it in a memory of average length (its IDF), so that it still tells
near matches apart. Only the rows that could still make the best few are read (best by the
index first, until the next could not even holding every common word). If fewer than
``limit`` memories hold a rarer word, the search is the plain one (every word, ranked by the
index). The index only narrows: the row's own columns (``COVERED``) decide what is returned.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import sqlite3

from ...model.memories import Cover
from .memory_words import counted

__all__ = ["COMMON", "COVERED", "RANK", "any_of", "search"]

_IN = "IN (SELECT value FROM json_each(?))"
COVERED = (f"m.scope {_IN} AND (m.confined IS NULL OR m.confined {_IN}) "
           "AND (m.expires_at IS NULL OR m.expires_at > ?)")
"""A ``Cover``'s exact filter, on the memories' rows as ``m``."""
COMMON = 10
"""A word more than one memory in ``COMMON`` holds is common (bm25 weighs it at most two
thirds of one held by a twentieth of them, and one held by half of them not at all)."""
_BATCH = 64
"""The rows ranked by the index read at a time (at least): enough, mostly, for the first
batch to settle the best few."""
RANK = "bm25(memories_fts, 1.0, 0.0), m.updated_at DESC"
"""Best matches first (lowest bm25): by the words of the text alone (the scope key's column
weighs nothing), the newest first among equals."""


def any_of(terms: list[str]) -> str:
    """An FTS5 query matching any of ``terms``: each a quoted string (FTS5 syntax cannot hide
    in a word of \\w, nor in a key's hex)."""
    return " OR ".join(f'"{term}"' for term in terms)


def search(db: sqlite3.Connection, found: list[str], where: Cover, limit: int) -> list[str]:
    """The best ``limit`` memories under ``where`` holding a word of ``found`` (distinct, at
    least one), as JSON."""
    counts, total = counted(db, found)
    common = {word: _idf(counts[word], total) for word in found
              if counts.get(word, 0) * COMMON > total}
    rare = [word for word in found if word not in common]
    if rare and common:
        rows = _by_rare(db, rare, common, where, limit)
        if len(rows) == limit:
            return rows
    return [row[0] for row in db.execute(
        "SELECT m.data FROM memories_fts f JOIN memories m ON m.n = f.rowid "
        f"WHERE memories_fts MATCH ? AND {COVERED} ORDER BY {RANK} LIMIT ?",
        (_match(found, where), *_covered(where), limit))]


def _by_rare(db: sqlite3.Connection, rare: list[str], common: dict[str, float],
             where: Cover, limit: int) -> list[str]:
    """The best ``limit`` of the memories under ``where`` holding a word of ``rare``: ranked
    by those by the index, less the IDF of each word of ``common`` they hold. Their rows
    are read best by the index first, a batch at a time, until the next could not beat the
    ``limit``-th best even holding every common word."""
    found = sorted(db.execute("SELECT bm25(memories_fts, 1.0, 0.0), rowid FROM memories_fts "
                              "WHERE memories_fts MATCH ?", (_match(rare, where),)))
    held = re.compile(r"\b(?:" + "|".join(map(re.escape, common)) + r")\b", re.IGNORECASE)
    most = sum(common.values())
    ranked: list[tuple[float, float, int]] = []
    batch = max(4 * limit, _BATCH)
    for start in range(0, len(found), batch):
        if len(ranked) >= limit and found[start][0] - most > _kth(ranked, limit):
            break
        scores = {n: score for score, n in found[start:start + batch]}
        for n, text, updated_at in db.execute(
                f"SELECT n, text, updated_at FROM memories m WHERE n {_IN} AND {COVERED}",
                (json.dumps(list(scores)), *_covered(where))):
            also = {word.casefold() for word in held.findall(text)}
            ranked.append((scores[n] - sum(common.get(w, 0.0) for w in also), -updated_at, n))
    best = [n for _, _, n in heapq.nsmallest(limit, ranked)]
    # Filtered again: a write may have come between these reads (fewer than ``limit``
    # left, the search is done again the plain way).
    data = dict(db.execute(f"SELECT n, data FROM memories m WHERE n {_IN} AND {COVERED}",
                           (json.dumps(best), *_covered(where))))
    return [data[n] for n in best if n in data]


def _kth(ranked: list[tuple[float, float, int]], limit: int) -> float:
    """The ``limit``-th best score among ``ranked``."""
    return heapq.nsmallest(limit, ranked)[-1][0]


def _match(found: list[str], where: Cover) -> str:
    """The MATCH of the memories filed under a key of ``where`` holding a word of ``found``."""
    keys = any_of([key.encode().hex() for key in where.scopes])
    return f"scope : ({keys}) AND text : ({any_of(found)})"


def _covered(where: Cover) -> tuple[str, str, float]:
    return json.dumps(where.scopes), json.dumps(where.places), where.at


def _idf(held: int, total: int) -> float:
    """bm25's IDF of a word ``held`` by so many of ``total`` memories (as FTS5 has it)."""
    return max(math.log((total - held + 0.5) / (held + 0.5)), 1e-6)
