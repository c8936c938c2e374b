"""A second process on the same store: several OS processes fire the same slot at once, on
each store kind; the slot's key lets exactly one run win, and every process is told of
that one run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.postgres import PG_DSN, fresh_schema

ROOT = Path(__file__).resolve().parents[2]

FIRE = textwrap.dedent('''
    """Open the store, start a Scheduler just before the slot, wait for the word, move its
    clock past the slot, fire, and print what it claimed."""
    import asyncio, json, sys
    from datetime import UTC, datetime
    from pathlib import Path

    from runtime import EchoProvider, FilesStore, Runtime, SQLiteStore
    from runtime.stores.postgres import PostgresStore
    from schedules import ScheduleBook, ScheduleConfig, Scheduler, load_schedules

    SLOT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    async def main(kind: str, where: str, when: str) -> None:
        store = {"sqlite": lambda: SQLiteStore(Path(where)),
                 "files": lambda: FilesStore(Path(where)),
                 "postgres": lambda: PostgresStore(sys.argv[4], schema=where, pool_size=2),
                 }[kind]()
        defined = load_schedules([ScheduleConfig(name="job", cron="0 9 * * *", prompt="p")],
                                 default_timezone="UTC", channels=[])
        now = [datetime(2026, 3, 2, 8, 59, 59, tzinfo=UTC)]  # started before the slot
        async with store, Runtime(store, EchoProvider()) as rt:
            async with Scheduler(ScheduleBook(store, defined, clock=lambda: now[0]), rt,
                                 timers=False) as s:
                fired = [f.run.id for f in s.started]
                print("ready", flush=True)
                sys.stdin.readline()  # every process fires together
                now[0] = datetime.fromisoformat(when)
                fired += [f.run.id for f in await s.fire_due(woken="job")]
                fired += [f.run.id for f in await s.fire_due()]  # a duplicate trigger
            await rt.idle()
            runs = [r.id for r in await rt.records.runs() if r.idempotency_key == "schedule:job:"
                    + SLOT.isoformat()]
        print(json.dumps({"fired": fired, "runs": runs}), flush=True)

    asyncio.run(main(*sys.argv[1:4]))
''')


@pytest.fixture(params=["sqlite", "files", "postgres"])
async def where(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    kind = str(request.param)
    if kind == "postgres":
        async with fresh_schema() as schema:
            yield kind, schema
        return
    yield kind, str(tmp_path / ("maiden.db" if kind == "sqlite" else "files"))


def _process(script: Path, kind: str, where: str, when: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script), kind, where, when, PG_DSN],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.timeout(120)
async def test_processes_firing_one_slot_make_one_run(where: tuple[str, str],
                                                      tmp_path: Path) -> None:
    kind, place = where
    script = tmp_path / "fire.py"
    script.write_text(FIRE)
    # The schedule is known to the store before the slot (a new schedule starts from now).
    first = _process(script, kind, place, "2026-03-02T08:59:00+00:00")
    out, _ = first.communicate("\n", timeout=60)
    assert first.returncode == 0 and json.loads(out.splitlines()[-1])["runs"] == []
    procs = [_process(script, kind, place, "2026-03-02T09:00:02+00:00") for _ in range(4)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0
            results.append(json.loads(out.splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # One run holds the slot, and every process that fired was given that one run. A
    # process whose fire re-read the store after another had recorded the slot finds it
    # done and fires nothing (how far fires got is kept in the store; a loaded machine
    # sees that order), so at least one fired, and none was given another run.
    (run,) = {r for result in results for r in result["runs"]}
    assert {r for result in results for r in result["fired"]} == {run}
    assert all(result["fired"] in ([], [run]) for result in results)
