"""What the console's pages say, read as an operator reads them: which run another waits
behind (and why), run ids that tell runs apart, a slot's state said once, a chart without a
made-up scale, and a query parameter out of range refused as the API refuses it."""

from __future__ import annotations

import asyncio
import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from channels.http.console import spend
from channels.http.console.waiting import queued_behind
from runtime import Origin, Run, RunState, Runtime, Tool, Usage, tool
from schedules import ScheduleConfig
from tests.channels.http.console.test_console import TOKEN, browser, csrf_of, deploy
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled
from tests.processes.test_cli import _serve, _stop
from tests.samples import png


class Holder:
    """A tool that holds the runtime's lock until the test lets it go (its call is on
    record before it runs, so the store shows its run in its tool at once)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.tool: Tool = tool(name="hold", effect="idempotent_write", timeout_s=60)(self.hold)

    async def hold(self, what: str) -> str:
        """Hold on to something until released."""
        self.started.set()
        await self.release.wait()
        return what


async def hold_the_lock(rt: Runtime, holder: Holder) -> Run:
    """A run on another thread that is in its tool (so the lock is held) when this returns."""
    run = await rt.submit("research", '/tool hold {"what": "x"}')
    async with asyncio.timeout(10):
        await holder.started.wait()
    assert rt.operator.holds(run.id)
    return run


def texts(page: str, pattern: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", t)) for t in re.findall(pattern, page, re.S)]


async def test_an_approved_run_waiting_for_the_lock_says_it_is_queued_behind(
        tmp_path: Path) -> None:
    holder = Holder()
    async with echo_runtime(tmp_path / "m.db", [deploy, holder.tool]) as rt, \
            browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        pending = run.pending_approval
        assert pending is not None
        first = await hold_the_lock(rt, holder)
        inbox = await client.get("/approvals")
        decided = await client.post("/console/decide", data={
            "csrf": csrf_of(inbox.text), "run_id": run.id, "decision": "approve",
            "tool_call_id": pending.tool_call_id, "arguments_hash": pending.arguments_hash})
        assert decided.status_code == 303
        assert (await rt.records.get_run(run.id)).state is RunState.AWAITING_TOOL
        flash = await client.get(decided.headers["location"])
        (said,) = texts(flash.text, r'<p class="notice" role="status">(.*?)</p>')
        said = " ".join(said.split())
        assert said == (f"Decided for run {run.id[-8:]}; it is queued behind run "
                        f"{first.id[-8:]} (one run at a time: [runtime] concurrency = "
                        '"global"), and goes on when that run ends.'), said
        now = await client.get("/")
        row = re.search(rf'<tr data-run="{run.id}">(.*?)</tr>', now.text, re.S)
        assert row, now.text
        assert "queued behind run" in row[1] and "awaiting tool" not in row[1]
        holding = re.search(rf'<tr data-run="{first.id}">(.*?)</tr>', now.text, re.S)
        assert holding and "awaiting tool" in holding[1] and "queued" not in holding[1]
        page = await client.get(f"/runs/{run.id}")
        assert f'href="/runs/{first.id}"' in page.text and 'id="run-behind"' in page.text
        holder.release.set()
        done = await asyncio.wait_for(rt.wait(run.id), 10)
        assert done.state is RunState.COMPLETED
        assert 'id="run-behind"' not in (await client.get(f"/runs/{run.id}")).text
        await asyncio.wait_for(rt.wait(first.id), 10)


async def test_a_run_queued_behind_an_older_run_of_its_thread_says_so(tmp_path: Path) -> None:
    holder = Holder()
    async with echo_runtime(tmp_path / "m.db", [holder.tool], concurrency="thread") as rt, \
            browser(rt) as client:
        first = await hold_the_lock(rt, holder)
        second = await rt.submit("research", "and then?")
        page = await client.get(f"/runs/{second.id}")
        (said,) = texts(page.text, r'<dd id="run-behind">(.*?)</dd>')
        assert " ".join(said.split()) == (f"queued behind run {first.id[-8:]}, which is "
                                         "ahead of it on its thread")
        holder.release.set()
        await asyncio.wait_for(rt.wait(second.id), 10)


async def test_short_run_ids_show_the_part_that_differs(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        runs = [await rt.send("t", f"hello {i}") for i in range(3)]
        for path in ("/runs", "/threads/t"):
            page = await client.get(path)
            shown = re.findall(r'<a href="/runs/(\w+)">(\w+)</a>', page.text)
            assert sorted(shown) == sorted((r.id, r.id[-8:]) for r in runs), (path, shown)


async def test_out_of_range_offsets_are_refused_like_the_api(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        await rt.send("t", "hello")
        for path in ("/threads?offset=9223372036854775808", "/threads?offset=-1",
                     "/threads?q=t&offset=9223372036854775808", "/threads?offset=ten",
                     "/threads/t?offset=9223372036854775808"):
            page = await client.get(path)
            assert page.status_code == 422, (path, page.text[:300])
            (said,) = texts(page.text, r'<p class="error" role="alert">(.*?)</p>')
            assert said.startswith("offset must be a whole number from 0 to 1,000,000,000, "
                                   "not '"), said
        api = await client.get("/v1/threads?offset=9223372036854775808",
                               headers={"Authorization": f"Bearer {TOKEN}"})
        assert api.status_code == 422
        assert (await client.get("/threads?offset=0")).status_code == 200
        assert (await client.get("/threads/t?offset=1000000000")).status_code == 200


async def test_a_slot_says_its_state_once(tmp_path: Path) -> None:
    slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(slot - timedelta(minutes=5))
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    holder = Holder()
    async with echo_runtime(tmp_path / "m.db", [holder.tool]) as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            browser(rt, schedules=scheduler) as client:
        first = await hold_the_lock(rt, holder)  # the slot's run must wait
        clock.now = slot + timedelta(seconds=2)
        (fired,) = await scheduler.fire_due()
        page = await client.get("/schedules/hourly")
        row = re.search(r"<tr>(.*?)</tr>", page.text.split("<tbody>")[1], re.S)
        assert row, page.text
        assert [c.strip() for c in texts(row[1], r"<td[^>]*>(.*?)</td>")] == [
            "2026-03-02T09:00:00+00:00", fired.run.id[-8:], "queued", ""]
        holder.release.set()
        await asyncio.wait_for(rt.wait(first.id), 10)
        await asyncio.wait_for(rt.wait(fired.run.id), 10)


async def test_the_spend_charts_invent_no_maximum_at_zero_spend(tmp_path: Path) -> None:
    labels = [f"03-0{i}" for i in range(1, 8)]
    chart = spend.bar_chart([0.0] * 7, labels, title="cost", unit="$", css="cost")
    assert "max" not in chart and "1.0000" not in chart
    assert chart.count('height="0.0"') == 7  # every bar is flat
    spent = spend.bar_chart([0.0, 0.25, 0.0, 0, 0, 0, 0], labels, title="cost", unit="$",
                            css="cost")
    assert "max 0.2500 $" in spent
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        page = await client.get("/spend")
        assert page.status_code == 200 and "Nothing spent." in page.text
        assert "max " not in page.text


S = RunState
# (thread, state, driven) of each unfinished run, oldest first; whom each waits behind.
TABLE = [
    # one at a time: an approved run waits behind the one being driven
    ([("a", S.AWAITING_TOOL, True), ("b", S.AWAITING_TOOL, False)], True, {1: 0}),
    # threads side by side: it does not wait for another thread's run
    ([("a", S.AWAITING_TOOL, True), ("b", S.AWAITING_TOOL, False)], False, {}),
    # behind an older run of its own thread, even one that waits for a person
    ([("a", S.AWAITING_APPROVAL, False), ("a", S.QUEUED, False)], False, {1: 0}),
    ([("a", S.RUNNING, True), ("b", S.QUEUED, False), ("b", S.QUEUED, False)], True,
     {1: 0, 2: 1}),
    # nothing driven: a lone run about to be taken up waits behind no one
    ([("a", S.AWAITING_TOOL, False)], True, {}),
    # a run waiting for a person waits for the person, not for the lock
    ([("a", S.RUNNING, True), ("b", S.AWAITING_APPROVAL, False)], True, {}),
]


@pytest.mark.parametrize(("runs", "one_at_a_time", "expected"), TABLE)
def test_whom_a_run_waits_behind(runs: list[tuple[str, RunState, bool]], one_at_a_time: bool,
                                 expected: dict[int, int]) -> None:
    active = [Run(id=f"r{i}", thread_id=t, state=state, text="x", created_at=float(i))
              for i, (t, state, _) in enumerate(runs)]
    driven = {f"r{i}" for i, (_, _, d) in enumerate(runs) if d}
    found = queued_behind(active, driven.__contains__, one_at_a_time=one_at_a_time)
    assert {int(k[1:]): int(v.id[1:]) for k, v in found.items()} == expected


def test_maiden_run_refuses_an_offset_out_of_range_with_a_422(home: Path) -> None:
    """As seen: ``maiden run``'s console answered this offset with a 500."""
    proc, banner = _serve(home)
    url = banner.split("  http        ", 1)[1].split()[0]
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/").status_code == 200  # takes a session (no token: local)
            page = client.get("/threads?offset=9223372036854775808")
            api = client.get("/v1/threads?offset=9223372036854775808")
    finally:
        _stop(proc)
    assert page.status_code == 422, page.text[:300]
    assert "offset must be a whole number from 0 to 1,000,000,000" in page.text
    assert "Traceback" not in page.text
    assert api.status_code == 422


async def test_a_thread_shows_images_as_thumbnails_and_files_as_chips(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        shot = await rt.kept.files.put("shot.png", "image/png", png(80, 60))
        page_file = await rt.kept.files.put("page.html", "text/html", b"<script>alert(1)</script>")
        await rt.send("t", "look", files=[shot, page_file])
        async with browser(rt) as client:
            page = await client.get("/threads/t")
            src = f"/console/files/{shot.digest}?name=shot.png"
            assert f'<img src="{src}" alt="shot.png"' in page.text
            assert f'href="/console/files/{page_file.digest}?name=page.html"' in page.text
            assert "img-src 'self' data:" in page.headers["content-security-policy"]
            image = await client.get(src)
            assert image.status_code == 200 and image.headers["content-type"] == "image/png"
            html_file = await client.get(f"/console/files/{page_file.digest}")
            assert html_file.headers["content-type"] == "application/octet-stream"
            assert html_file.headers["content-disposition"].startswith("attachment")
            assert (await client.get("/console/files/" + "0" * 64)).status_code == 404
        async with browser(rt, sign_in=False) as stranger:
            refused = await stranger.get(src)
            assert refused.status_code == 303 and "/sign-in" in refused.headers["location"]


def test_spend_adds_up_by_agent_person_and_place() -> None:
    now = 1_764_849_600.0

    def run(n: int, agent: str, user: str | None, place: tuple[str, ...], cost: float) -> Run:
        return Run(id=f"{n:032x}", thread_id=f"t{n}", text="x", created_at=now - n, agent=agent,
                   origin=Origin(channel="slack" if place else "http", user=user, place=place),
                   usage=Usage(input_tokens=100, output_tokens=n), cost_usd=cost)

    found = spend.spend_of([run(1, "", "U1", ("C1",), 0.5), run(2, "eng", "U1", ("C2",), 1.0),
                            run(3, "eng", None, (), 0.25)],
                           days=7, now=now, default_agent="support")
    assert found.groups["agent"] == [("eng", 205, 1.25, 2), ("support", 101, 0.5, 1)]
    assert found.groups["user"] == [("U1", 203, 1.5, 2), ("local", 103, 0.25, 1)]
    assert found.groups["place"] == [("slack:C2", 102, 1.0, 1), ("slack:C1", 101, 0.5, 1),
                                     ("http", 103, 0.25, 1)]
    assert [t[0] for t in found.threads] == ["t2", "t1", "t3"]
