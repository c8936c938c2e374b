"""The other runtimes serving the same store (runtime/serving/peers.py), over a real SQLite
store: who serves it (a heartbeat and a fresh lease), which of them drives a run, and a
request one of them refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import Run, RunError, RunState, SQLiteStore
from runtime.model.requests import ControlRequest, Instance
from runtime.model.runs import transition
from runtime.serving.control import instance_lease
from runtime.serving.leases import thread_lease
from runtime.serving.peers import Peers
from runtime.stores.base import Checkpoint

S = RunState
ME = "me"
MINE = "me/4242@another-machine"
OTHER = "other/4242@another-machine"
"""A process of another machine: nothing here can tell whether it lives but its leases."""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "maiden.db") as opened:
        yield opened


async def _serving(store: SQLiteStore, instance_id: str = "other", *, alive: bool = True,
                   holder: str = OTHER) -> None:
    """``instance_id`` beats; with ``alive``, it holds its instance lease too."""
    await store.beat(Instance(id=instance_id, pid=4242, host="another-machine",
                              started_at=0.0, beat_at=0.0))
    if alive:
        assert await store.take_lease(instance_lease(instance_id), holder, 60) is None


async def _running(store: SQLiteStore, run_id: str, owner: str) -> Run:
    queued = Run(id=run_id, thread_id=f"t-{run_id}", text="hi")
    await store.create_run(queued)
    running, step = transition(queued, S.RUNNING, "started", owner=owner, first_entry=0,
                               started_at=queued.created_at, version=queued.version + 1)
    await store.commit(Checkpoint(thread_id=running.thread_id, position=None, run=running,
                                  transitions=[step]))
    return await store.get_run(run_id)


async def _first_request(store: SQLiteStore) -> ControlRequest:
    """The first request not handled, once there is one (as another process sees it: a
    SQLite store tells nobody)."""
    while not (pending := await store.requests()):  # noqa: ASYNC110 (another process's view)
        await asyncio.sleep(0.01)
    return pending[0]


async def test_a_process_serves_while_its_lease_is_fresh(store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    assert await peers.servers() == []
    await _serving(store, "beat-only", alive=False)  # a heartbeat left, its lease gone
    assert await peers.servers() == []
    await _serving(store)
    assert [i.id for i in await peers.servers()] == ["other"]


async def test_a_run_is_held_elsewhere_only_by_another_live_owner(store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    await _serving(store)
    await _serving(store, ME, holder=MINE)  # this process serves too
    theirs = Run(id="r1", thread_id="t", text="hi", state=S.RUNNING, owner="other")
    assert await peers.held_elsewhere(theirs) == "process 4242 on another-machine"
    for run in (theirs.model_copy(update={"owner": ME}),
                theirs.model_copy(update={"owner": None}),
                theirs.model_copy(update={"owner": "dead"}),  # serves the store no more
                theirs.model_copy(update={"state": S.COMPLETED}),
                theirs.model_copy(update={"state": S.QUEUED})):
        assert await peers.held_elsewhere(run) is None, run


async def test_a_queued_run_is_driven_where_its_threads_lease_is_held(
        store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    await _serving(store)
    await _serving(store, ME, holder=MINE)  # this process serves too
    queued = Run(id="r1", thread_id="t", text="hi")
    assert await peers.driving_elsewhere(queued) is None  # nobody holds the thread
    assert await store.take_lease(thread_lease("t"), OTHER, 60) is None
    assert await peers.held_elsewhere(queued) is None  # its start is not written...
    # ...but the worker holding its thread may be driving it already.
    assert await peers.driving_elsewhere(queued) == "process 4242 on another-machine"
    mine = Run(id="r2", thread_id="u", text="hi")
    assert await store.take_lease(thread_lease("u"), MINE, 60) is None
    assert await peers.driving_elsewhere(mine) is None


async def test_who_owns_the_records_of_a_run(store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    await _serving(store)
    await _serving(store, ME, holder=MINE)  # this process serves too
    await _running(store, "theirs", "other")
    await _running(store, "mine", ME)
    await _running(store, "orphan", "dead")
    await store.create_run(Run(id="queued", thread_id="q", text="hi"))
    owned = peers.elsewhere()
    assert [await owned(r) for r in ("theirs", "mine", "orphan", "queued")] == [
        True, False, False, False]
    found, live = await peers.owned_elsewhere("theirs", None)
    assert found and live == {"other", ME}
    # The live processes found once are used for the next question.
    assert await peers.owned_elsewhere("orphan", {"orphan-owner-is-live", "dead"}) == (
        True, {"orphan-owner-is-live", "dead"})


async def test_a_refusal_comes_back_as_the_run_error_it_names(store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    await store.create_run(Run(id="r1", thread_id="t", text="hi"))

    async def refuse(error: str | None, result: str | None) -> None:
        """The serving process: refuses the first request it finds."""
        request = await _first_request(store)
        assert (request.kind, request.run_id) == ("cancel", "r1")
        assert request.payload == {"by": "ann"}
        assert await store.finish_request(request.model_copy(update={
            "handled_at": 1.0, "handled_by": "other", "ok": False, "error": error,
            "result": result}))

    for error, result, reason, says in [
            ("already_ended", "run r1 already ended", "already_ended", "already ended"),
            ("no such reason", None, "cancel_refused", "refused")]:
        async with asyncio.timeout(10):
            server = asyncio.create_task(refuse(error, result))
            with pytest.raises(RunError, match=says) as refused:
                await peers.ask("cancel", "r1", {"by": "ann"}, now=1.0, timeout_s=10)
            await server
        assert refused.value.reason == reason


async def test_an_answered_request_hands_back_the_run_as_it_stands(
        store: SQLiteStore) -> None:
    peers = Peers(store, ME)
    await store.create_run(Run(id="r1", thread_id="t", text="hi"))

    async def answer() -> None:
        await store.finish_request((await _first_request(store)).model_copy(update={
            "handled_at": 1.0, "handled_by": "other", "ok": True}))

    async with asyncio.timeout(10):
        server = asyncio.create_task(answer())
        run = await peers.ask("resume", "r1", {}, now=1.0, timeout_s=10)
        await server
    assert run == await store.get_run("r1")
