"""The store contract, runs (DESIGN §3): creating, finding and listing runs and threads, on
every backend."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Generic, Protocol

import pytest

from runtime.errors import NotFound, StoreError
from runtime.model.entries import Usage, UserMessage
from runtime.model.runs import ARRIVAL_STEP_S as STEP
from runtime.model.runs import Origin, ReplyDelivery, Run, new_run_id
from runtime.stores.base import Checkpoint, SpendAsk, SpendScope, Store
from runtime.stores.files import FilesStore
from runtime.stores.postgres import PostgresStore
from runtime.stores.sqlite import SQLiteStore
from tests.runtime.stores.contract import AnyStore, S, advance, all_kinds, make_run, started


@pytest.mark.parametrize("cls", [SQLiteStore, FilesStore, PostgresStore])
def test_backends_implement_the_protocol(cls: type) -> None:
    roles = [base for base in Store.__mro__ if base not in (Store, Protocol, Generic, object)]
    assert len(roles) == 11
    for role in roles:  # Store's methods are its roles' (Store itself declares none)
        for name, method in vars(role).items():
            if not name.startswith("_") and inspect.isfunction(method):
                assert inspect.signature(getattr(cls, name)) == inspect.signature(method), name


async def test_a_store_in_place_is_not_gone(store: AnyStore) -> None:
    await started(store)
    assert store.gone() is None


# -- runs


async def test_create_and_get_run_round_trip(store: AnyStore) -> None:
    run = make_run("thread-1", key="k1", text="héllo 日本語")
    assert await store.create_run(run) == run
    assert await store.get_run(run.id) == run
    assert await store.load_entries("thread-1") == []


@pytest.mark.parametrize("run_id", ["nope", "", "../x", "a/b", "x" * 500])
async def test_unknown_run_is_not_found(store: AnyStore, run_id: str) -> None:
    with pytest.raises(NotFound):
        await store.get_run(run_id)
    assert await store.transitions(run_id) == []


async def test_run_ids_are_opaque_strings(store: AnyStore) -> None:
    ids = ["../../etc/passwd", "a/b", "A", "a", "r" * 300, "日本"]
    for run_id in ids:
        await store.create_run(make_run("t", run_id=run_id, text=run_id))
    for run_id in ids:
        assert (await store.get_run(run_id)).text == run_id


async def test_idempotency_key_returns_the_original_run(store: AnyStore) -> None:
    first = await started(store, key="slack:evt-1")
    again = await store.create_run(make_run("t", key="slack:evt-1", at=2000.0))
    assert again == first  # the stored run, as it is now
    with pytest.raises(NotFound):
        await store.get_run(make_run().id)
    assert [r.id for r in await store.list_runs()] == [first.id]
    other = await store.create_run(make_run("t", key="slack:evt-2"))
    assert other.id != first.id
    assert await store.run_for_key("slack:evt-1") == first
    assert await store.run_for_key("slack:evt-2") == other
    assert await store.run_for_key("slack:evt-3") is None


@pytest.mark.timeout(20)
async def test_concurrent_creates_with_one_key_make_one_run(
    store: AnyStore, new_store: Callable[[], AnyStore]
) -> None:
    async with new_store() as other, asyncio.timeout(10):
        made = await asyncio.gather(*(s.create_run(make_run(f"t{i}", key="same"))
                                      for i in range(8) for s in (store, other)))
    assert len({run.id for run in made}) == 1
    assert len(await store.list_runs()) == 1


async def test_a_run_id_is_created_once(store: AnyStore) -> None:
    run = await store.create_run(make_run("t"))
    with pytest.raises(StoreError):
        await store.create_run(make_run("other", run_id=run.id))
    assert await store.get_run(run.id) == run


async def test_a_threads_runs_keep_their_order_of_arrival(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    """A run taken by a process whose clock is behind is stamped just after the runs that
    came in before it (``ARRIVAL_STEP_S``), so the thread's order is the order of arrival,
    told by the stamps alone (what orders their replies in the outbox)."""
    first = Run(id=new_run_id(100.0), thread_id="t", text="one", created_at=100.0,
                updated_at=100.0)
    assert await store.create_run(first) == first
    async with new_store() as behind:  # another replica, its clock 50 s behind
        late = Run(id=new_run_id(50.0), thread_id="t", text="two", created_at=50.0,
                   updated_at=50.0)
        stored = await behind.create_run(late)
        assert stored.created_at == 100.0 + STEP and stored.id == late.id
        third = await behind.create_run(Run(id=new_run_id(60.0), thread_id="t", text="3",
                                            created_at=60.0, updated_at=60.0))
    assert [r.text for r in await store.list_runs(thread_id="t")] == ["one", "two", "3"]
    assert [r.text for r in await store.list_runs(thread_id="t", states=[S.QUEUED])] == \
        ["one", "two", "3"]
    assert (await store.get_run(third.id)).created_at == 100.0 + 2 * STEP
    # Other threads are not held to it.
    other = Run(id=new_run_id(10.0), thread_id="u", text="x", created_at=10.0, updated_at=10.0)
    assert (await store.create_run(other)).created_at == 10.0


async def test_an_accepted_run_with_its_threads_runs_listed(store: AnyStore) -> None:
    """``accept_run``: the run as ``create_run`` gives it, on disk once ``on_disk`` is
    awaited, and, where the store reads them with the write, the thread's runs that have
    not ended, as ``list_runs`` would list them then (what a worker that starts on the
    message begins with)."""
    done = await store.create_run(make_run("t", at=1000.0))
    ended, step = advance(done, S.CANCELLED)
    await store.commit(Checkpoint("t", None, run=ended, transitions=[step]))
    waiting = await store.create_run(make_run("t", at=2000.0))
    await store.create_run(make_run("u", at=2500.0))
    accepted = await store.accept_run(make_run("t", key="k", at=3000.0))
    run, listed = accepted.run, accepted.listed
    assert await store.get_run(run.id) == run  # committed: read back before its flush
    if accepted.on_disk is not None:
        await accepted.on_disk
    active = await store.list_runs(thread_id="t", states=[S.QUEUED, S.RUNNING,
                                                          S.AWAITING_TOOL, S.AWAITING_APPROVAL])
    assert [r.id for r in active] == [waiting.id, run.id]
    if isinstance(store, SQLiteStore):
        assert listed == active
    else:
        assert listed is None or listed == active
    again = await store.accept_run(make_run("t", key="k", at=4000.0))
    if again.on_disk is not None:
        await again.on_disk
    # The key's run: nothing written, nothing listed.
    assert again.run == run and again.listed is None


# -- listing


async def test_list_runs_order_and_filters(store: AnyStore) -> None:
    b = await store.create_run(make_run("t", at=2000.0))
    a = await store.create_run(make_run("u", at=1000.0))
    c1 = await store.create_run(make_run("t", at=3000.0))
    c2 = await store.create_run(make_run("u", at=3000.0))  # same time: insertion order
    c3 = await store.create_run(make_run("t", at=3000.0))
    running, _ = advance(b, S.RUNNING)
    await store.commit(Checkpoint("t", None, run=running))

    def ids(runs: list[Run]) -> list[str]:
        return [run.id for run in runs]

    assert ids(await store.list_runs()) == ids([a, b, c1, c2, c3])
    assert ids(await store.list_runs(limit=2)) == ids([c2, c3])
    assert ids(await store.list_runs(limit=100)) == ids([a, b, c1, c2, c3])
    assert await store.list_runs(limit=0) == []
    assert ids(await store.list_runs(thread_id="t")) == ids([b, c1, c3])
    assert ids(await store.list_runs(thread_id="u", limit=1)) == ids([c2])
    assert ids(await store.list_runs(states=[S.QUEUED])) == ids([a, c1, c2, c3])
    assert await store.list_runs(states=[S.RUNNING]) == [running]
    assert ids(await store.list_runs(states=[S.RUNNING, S.QUEUED], thread_id="t", limit=2)) \
        == ids([c1, c3])
    assert await store.list_runs(states=[]) == []
    assert await store.list_runs(thread_id="nobody") == []


async def test_list_threads_most_recent_first(store: AnyStore) -> None:
    assert await store.list_threads() == []
    old = await store.create_run(make_run("old", at=100.0))
    await store.create_run(make_run("new", at=200.0))
    later = await store.create_run(make_run("old", at=250.0))
    # A thread's updated_at is when its latest message arrived; checkpoints leave it alone.
    moved, _ = advance(old, S.RUNNING)
    moved = moved.model_copy(update={"updated_at": 300.0})
    await store.commit(Checkpoint("old", 0, [UserMessage(run_id=old.id, text="x")], run=moved))
    first, second = await store.list_threads()
    assert (first.id, first.length, first.runs, first.created_at, first.updated_at) == (
        "old", 1, 2, 100.0, 250.0)
    assert first.last_state == later.state == S.QUEUED
    assert (second.id, second.length, second.runs, second.updated_at) == ("new", 0, 1, 200.0)
    await store.create_run(make_run("new", at=150.0))  # stamped late: no going back
    assert [(t.id, t.updated_at) for t in await store.list_threads()] == [
        ("old", 250.0), ("new", 200.0 + STEP)]


async def test_thread_pages_and_stats(store: AnyStore) -> None:
    for i in range(5):
        await store.create_run(make_run(f"t{i}", at=100.0 + i))
    ids = [t.id for t in await store.list_threads()]
    assert ids == ["t4", "t3", "t2", "t1", "t0"]
    assert [t.id for t in await store.list_threads(offset=1, limit=2)] == ["t3", "t2"]
    assert [t.id for t in await store.list_threads(offset=4)] == ["t0"]
    assert await store.list_threads(offset=9, limit=3) == []
    run = await started(store, "t0")
    done, step = advance(run, S.COMPLETED, reply="ok")
    await store.commit(Checkpoint("t0", 1, run=done, transitions=[step], deliveries=[
        ReplyDelivery(key="a", run_id=run.id, thread_id="t0", channel="slack", text="ok"),
        ReplyDelivery(key="b", run_id=run.id, thread_id="t0", channel="slack", text="ok")]))
    await store.mark_delivered("a", "m1", at=1.0)
    stats = await store.stats()
    assert stats.threads == 5 and stats.runs == {S.QUEUED: 5, S.COMPLETED: 1}
    assert (stats.deliveries_pending, stats.deliveries_sent) == (1, 1)


async def test_reopen_sees_everything(
    store: AnyStore, new_store: Callable[[], AnyStore]
) -> None:
    run = await started(store, key="k")
    done, step = advance(run, S.COMPLETED, reply="ok")
    delivery = ReplyDelivery(key="d", run_id=run.id, thread_id="t", channel="slack", text="ok")
    await store.commit(Checkpoint("t", 1, all_kinds(run.id), run=done, transitions=[step],
                                  deliveries=[delivery]))
    await store.mark_delivered("d", "m1", at=5.0)
    before = (await store.load_entries("t"), await store.list_runs(),
              await store.list_threads(), await store.transitions(run.id),
              await store.deliveries())
    await store.close()
    async with new_store() as reopened:
        after = (await reopened.load_entries("t"), await reopened.list_runs(),
                 await reopened.list_threads(), await reopened.transitions(run.id),
                 await reopened.deliveries())
        assert after == before
        assert await reopened.create_run(make_run("t", key="k")) == done
    with pytest.raises(StoreError):
        await store.get_run(run.id)  # closed


# -- the spend ledger (spend caps)


async def test_spent_sums_the_runs_since_a_time_by_whose_they_are(store: AnyStore) -> None:
    day = 1_764_806_400.0  # 2025-12-04 00:00 UTC

    def made(n: int, at: float, agent: str, user: str | None, place: tuple[str, ...]) -> Run:
        return Run(id=new_run_id(at), thread_id=f"t{n}", text="x" * 10_000, created_at=at,
                   updated_at=at, agent=agent, usage=Usage(input_tokens=n),
                   origin=Origin(channel="discord", target={"channel": "C"}, user=user,
                                 place=place))

    thread = ("TH", "C1", "G1")  # a Discord thread under C1: its place is C1
    runs = [made(1, day - 1, "eng", "U1", ("C1", "G1")),  # the day before: not counted
            made(2, day, "eng", "U1", ("C1", "G1")),
            made(4, day + 60, "", "U1", thread),
            made(8, day + 120, "eng", None, ("C2", "G1"))]
    for run in runs:
        await store.create_run(run)
    # A checkpoint moves the amounts on: what the run has spent so far.
    moved, step = advance(runs[2], S.RUNNING, "started",
                          usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2,
                                      cache_creation_tokens=1), cost_usd=0.25)
    await store.commit(Checkpoint("t4", None, run=moved, transitions=[step]))

    async def spent(scope: SpendScope, *keys: str, since: float = day) -> tuple[int, float]:
        found = await store.spent([SpendAsk(since, scope, keys)])
        assert (found.now is not None) == isinstance(store, PostgresStore)
        (sums,) = found.sums
        return sums

    assert await spent("user", "U1") == (2 + 18, 0.25)
    assert await spent("user", "U1", since=day - 1) == (1 + 2 + 18, 0.25)
    assert await spent("agent", "eng") == (2 + 8, 0.0)
    assert await spent("agent", "eng", "") == (2 + 18 + 8, 0.25)
    assert await spent("place", "discord:C1") == (2 + 18, 0.25)
    assert await spent("place", "discord:C2", "discord:C9") == (8, 0.0)
    assert await spent("user", "nobody") == (0, 0.0)
    assert await spent("agent", "eng", since=day + 121) == (0, 0.0)
    # Every ask in one read, answered in order.
    many = await store.spent([SpendAsk(day, "user", ("U1",)), SpendAsk(day, "user", ("U7",)),
                              SpendAsk(day - 1, "place", ("discord:C1", "discord:C2"))])
    assert many.sums == [(20, 0.25), (0, 0.0), (1 + 2 + 18 + 8, 0.25)]
    assert (await store.spent([])).sums == []
