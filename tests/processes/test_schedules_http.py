"""GET /v1/schedules, a schedule's slot history, run now, pause and resume over the real
server, and the
schedules on the command line (`maiden schedules`, `maiden schedules run NAME`)."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runtime import Origin, RunState
from schedules import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled, served

ROOT = Path(__file__).resolve().parents[2]
SLOT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def test_list_and_run_over_http(tmp_path: Path) -> None:
    configs = [ScheduleConfig(name="daily", cron="0 10 * * 1-5", timezone="Europe/Berlin",
                              prompt="the daily summary"),
               ScheduleConfig(name="off", cron="0 9 * * *", prompt="p", enabled=False)]
    clock = Clock(SLOT - timedelta(minutes=5))
    async with echo_runtime(tmp_path / "m.db") as rt:
        async with served(rt, token="t0k") as (client, _):
            # Without a scheduler (not `maiden run`), this process fires no schedules.
            assert (await client.get("/v1/schedules")).json() == {"schedules": []}
            assert (await client.post("/v1/schedules/daily/run")).status_code == 404
        async with scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
                served(rt, token="t0k", schedules=scheduler) as (client, _):
            clock.now = SLOT + timedelta(seconds=3)  # 10:00 in Berlin, a Monday
            (fired,) = await scheduler.fire_due()
            await rt.wait(fired.run.id)
            listed = (await client.get("/v1/schedules")).json()["schedules"]
            daily, off = listed
            assert daily["name"] == "daily" and daily["origin"] == "config"
            assert daily["timezone"] == "Europe/Berlin" and daily["deliver"] is None
            assert daily["next_fires"][0] == "2026-03-03T10:00:00+01:00"
            assert daily["last_slot"] == "2026-03-02T10:00:00+01:00"
            assert daily["last_run"]["state"] == "completed"
            assert daily["outcome"] == "completed (in thread schedule:daily)"
            assert off["enabled"] is False and off["next_fires"] == []
            ran = await client.post("/v1/schedules/daily/run", params={"wait": "true"})
            assert ran.status_code == 200, ran.text
            assert ran.json()["reply"] == "echo: the daily summary"
            run = await rt.records.get_run(ran.json()["run_id"])
            assert (run.idempotency_key or "").startswith("schedule:daily:manual:")
            missing = await client.post("/v1/schedules/nope/run")
            assert missing.status_code == 404
            assert "no schedule named 'nope'" in missing.json()["detail"]
            unauthorised = await client.get("/v1/schedules", headers={"Authorization": ""})
            assert unauthorised.status_code == 401


async def test_history_pause_and_resume_over_http(tmp_path: Path) -> None:
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    clock = Clock(SLOT - timedelta(hours=3, minutes=5))  # recorded at 05:55
    async with echo_runtime(tmp_path / "m.db") as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            served(rt, token="t0k", schedules=scheduler) as (client, _):
        for hour in (7, 9):  # 06:00 passes unfired (down); 08:00 too
            clock.now = SLOT.replace(hour=hour) + timedelta(seconds=2)
            (fired,) = await scheduler.fire_due()
            await rt.wait(fired.run.id)
        got = await client.get("/v1/schedules/hourly/history")
        assert got.status_code == 200, got.text
        slots = got.json()["slots"]
        assert [s["slot"] for s in slots] == [
            "2026-03-02T09:00:00+00:00", "2026-03-02T08:00:00+00:00",
            "2026-03-02T07:00:00+00:00", "2026-03-02T06:00:00+00:00"]
        assert [s["run"] and s["run"]["state"] for s in slots] == [
            "completed", None, "completed", None]
        assert slots[0]["outcome"] == "completed (in thread schedule:hourly)"
        assert slots[1]["outcome"] == "missed: maiden was not running at its time, and " \
            "misfire = 'once' did not run it"
        limited = await client.get("/v1/schedules/hourly/history", params={"limit": 1})
        assert len(limited.json()["slots"]) == 1

        assert (await client.post("/v1/schedules/hourly/pause")).status_code == 204
        listed = (await client.get("/v1/schedules")).json()["schedules"]
        assert listed[0]["paused"] is True and listed[0]["next_fires"] == []
        clock.now = SLOT.replace(hour=10) + timedelta(seconds=2)
        assert await scheduler.fire_due() == []  # paused: nothing fires
        assert (await client.post("/v1/schedules/hourly/resume")).status_code == 204
        listed = (await client.get("/v1/schedules")).json()["schedules"]
        assert listed[0]["paused"] is False
        assert listed[0]["next_fires"][0] == "2026-03-02T11:00:00+00:00"
        for path in ("/v1/schedules/nope/history", "/v1/schedules/nope/pause"):
            missing = await (client.get(path) if "history" in path else client.post(path))
            assert missing.status_code == 404, path
            assert "no schedule named 'nope'" in missing.json()["detail"]


async def maiden(home: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_maiden_schedules_run_and_list(home: Path) -> None:
    with (home / "agent.toml").open("a") as f:
        f.write('\n[[schedules]]\nname = "daily"\ncron = "0 9 * * 1-5"\n'
                'timezone = "America/New_York"\nprompt = "what happened yesterday"\n')
    code, out, err = await maiden(home, "schedules", "run", "daily")
    assert code == 0, err
    assert out == "echo: what happened yesterday\n"
    code, out, err = await maiden(home, "schedules", "run", "nightly")
    assert code == 2 and "no schedule named 'nightly'" in err
    code, out, _ = await maiden(home, "schedules")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "daily  '0 9 * * 1-5' America/New_York  -> thread 'schedule:daily'" \
                       "  origin=config"
    assert lines[1].startswith("    next: ") and lines[1].count("-05:00") + \
        lines[1].count("-04:00") == 3
    assert lines[2] == "    last slot: -"  # a run by hand is not a slot
    code, out, _ = await maiden(home, "runs", "--thread", "schedule:daily")
    assert code == 0 and RunState.COMPLETED.value in out


async def test_maiden_schedules_lists_a_real_last_slot_and_a_chat_schedule(home: Path) -> None:
    """What a `maiden run` left in the store — a fired slot, a schedule made from chat — is
    what `maiden schedules` prints: the slot with its outcome, and origin=chat."""
    daily = ScheduleConfig(name="daily", cron="0 9 * * 1-5", timezone="America/New_York",
                           prompt="what happened yesterday")
    with (home / "agent.toml").open("a") as f:
        f.write('\n[[schedules]]\nname = "daily"\ncron = "0 9 * * 1-5"\n'
                'timezone = "America/New_York"\nprompt = "what happened yesterday"\n')
    slot = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)  # 09:00 in New York, a Monday
    clock = Clock(slot - timedelta(minutes=5))
    async with echo_runtime(home / "data" / "maiden.db") as rt, \
            scheduled(rt, home / "data" / "maiden.db", [daily], clock) as scheduler:
        book = scheduler.book
        clock.now = slot + timedelta(seconds=2)
        (fired,) = await scheduler.fire_due()
        await rt.wait(fired.run.id)
        await book.create(name="remind", cron="0 8 * * 1", prompt="standup notes",
                          timezone=None, thread_id="chat:r1", request_key="k1",
                          origin=Origin(channel="chat", target={"room": "r1"}, user="u1"))
    code, out, err = await maiden(home, "schedules")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("daily  '0 9 * * 1-5' America/New_York") \
        and lines[0].endswith("origin=config")
    assert lines[2] == "    last slot: 2026-03-02T09:00:00-05:00  completed (in thread " \
                       "schedule:daily)"
    assert lines[3].startswith("remind  '0 8 * * 1' UTC") and lines[3].endswith("origin=chat")
    assert lines[5] == "    last slot: -"
