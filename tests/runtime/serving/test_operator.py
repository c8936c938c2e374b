"""The operator's levers on a runtime (runtime/serving/operator.py): its health and the
store's writability, which runs it drives now, and a run's trace link (leases among
processes: ``test_leases``; deliverers: ``outbox/``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import SQLiteStore, tool
from tests.scripted import call


async def test_a_healthy_store_is_written_and_taken_back(make_runtime: Any,
                                                         tmp_path: Path) -> None:
    db = tmp_path / "maiden.db"
    async with make_runtime(db=db) as (rt, _):
        assert rt.operator.health() is None
        assert rt.operator.agents.default.config.name == "maiden"  # what it runs
        async with SQLiteStore(db) as other:
            before = await other.instances()
            await rt.operator.check_writable()
            await rt.operator.check_writable()
            assert await other.instances() == before  # its probe taken back each time
        assert rt.operator.health() is None


async def test_a_store_whose_file_is_deleted_is_unhealthy(make_runtime: Any,
                                                          tmp_path: Path) -> None:
    db = tmp_path / "maiden.db"
    async with make_runtime(db=db) as (rt, _):
        db.unlink()
        problem = rt.operator.health()
        assert problem is not None and "was deleted" in problem and str(db) in problem
        assert rt.operator.health() == problem  # it stays so


async def test_holds_is_true_while_this_process_drives_the_run(make_runtime: Any) -> None:
    go = asyncio.Event()
    began = asyncio.Event()

    @tool
    async def hold() -> str:
        began.set()
        await go.wait()
        return "held"

    async with make_runtime([call("hold"), {"text": "done"}], [hold]) as (rt, _):
        run = await rt.submit("t", "go")
        async with asyncio.timeout(10):
            await began.wait()
        assert rt.operator.holds(run.id)
        go.set()
        assert (await rt.wait(run.id)).reply == "done"
        await rt.idle()
        assert not rt.operator.holds(run.id)
        assert rt.operator.trace_link(run) is None  # untraced
