"""The store contract, votes on replies: one per person per run, a change of mind replaces
it, a click delivered twice changes nothing; listed by time, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from runtime.model.requests import Vote
from tests.runtime.stores.contract import AnyStore


def vote(run: str, user: str, value: Literal["up", "down"], at: float) -> Vote:
    return Vote(run_id=run, user=user, value=value, at=at,
                thread_id=f"slack:{run}", channel="slack", place="C1", message="171.1")


async def test_one_vote_per_person_per_run(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    assert await store.votes() == []
    first = vote("r1", "U1", "up", 10.0)
    assert await store.put_vote(first) is True
    assert await store.put_vote(vote("r1", "U1", "up", 11.0)) is False  # the same click again
    assert await store.votes(run_id="r1") == [first]  # it keeps its first time
    other = vote("r1", "U2", "down", 12.0)
    assert await store.put_vote(other) is True
    changed = vote("r1", "U1", "down", 13.0)
    assert await store.put_vote(changed) is True  # a change of mind replaces the vote
    async with new_store() as again:
        assert await again.votes(run_id="r1") == [other, changed]
        assert await again.votes(run_id="r2") == []
    hostile = vote("../../r", "../U", "up", 14.0)
    assert await store.put_vote(hostile) is True
    assert await store.votes(run_id="../../r") == [hostile]


async def test_votes_page_by_time(store: AnyStore) -> None:
    made = [vote(f"r{i % 3}", f"U{i}", "up" if i % 2 else "down", 100.0 + i)
            for i in range(7)]
    for v in reversed(made):
        await store.put_vote(v)
    assert await store.votes() == made
    assert await store.votes(since=102.0) == made[3:]
    page = await store.votes(limit=3)
    assert page == made[:3]
    assert await store.votes(since=page[-1].at, limit=3) == made[3:6]
    assert await store.votes(run_id="r1", since=101.0) == [made[4]]


async def test_votes_at_once_keep_one_each(store: AnyStore) -> None:
    """Replicas taking clicks together: every person's last vote is there, once."""
    await asyncio.gather(*(store.put_vote(vote("r1", f"U{i}", "up", float(i)))
                           for i in range(12)))
    assert [v.user for v in await store.votes(run_id="r1")] == [f"U{i}" for i in range(12)]
