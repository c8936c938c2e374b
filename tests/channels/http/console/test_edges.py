"""The console's rough edges (issue 55), on the served HTML (no browser needed): thread ids
``.`` and ``..`` linked so that a browser does not resolve them away, no "change name"
where there is no name to change, the file chip's icon drawn inline and its own height,
"Start a thread" at the top of the threads page, and a slot's outcome beside its state
without repeating it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from channels.http.console.console import beyond_state, quote_path
from schedules import ScheduleConfig
from tests.channels.http.console.test_console import browser
from tests.channels.http.console.test_reading import texts
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled


@pytest.mark.parametrize(("thread", "segment"), [
    (".", "%2E"), ("..", "%2E%2E"),  # as they are, a browser reads them as folders
    ("...", "..."), ("a.b", "a.b"), ("./x", ".%2Fx"), ("a/b", "a%2Fb"), ("é t", "%C3%A9%20t"),
])
def test_a_thread_id_is_one_path_segment(thread: str, segment: str) -> None:
    assert quote_path(thread) == segment


async def test_threads_named_dot_and_dot_dot_are_linked_and_shown(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        for thread in (".", ".."):
            await rt.send(thread, f"in {thread}")
        async with browser(rt, token=None) as client:
            listing = (await client.get("/threads")).text
            for thread, segment in ((".", "%2E"), ("..", "%2E%2E")):
                assert f'<a href="/threads/{segment}">{thread}</a>' in listing, listing
                page = await client.get(f"/threads/{segment}")
                assert page.status_code == 200 and f"echo: in {thread}" in page.text


async def test_change_name_is_offered_nowhere_and_sign_out_only_with_tokens(
        tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        async with browser(rt, token=None) as client:
            page = (await client.get("/")).text
            assert "change name" not in page and "sign out" not in page
            assert "<span>local</span>" in page
        async with browser(rt) as client:
            page = (await client.get("/")).text
            assert "change name" not in page and "sign out" in page


async def test_a_file_chip_draws_its_icon_and_keeps_its_height(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        notes = await rt.kept.files.put("notes.txt", "text/plain", b"kept\n")
        await rt.send("t", "read this", files=[notes])
        async with browser(rt) as client:
            page = (await client.get("/threads/t")).text
            css = (await client.get("/console/static/console.css")).text
    (chip,) = re.findall(r'<a class="chip"[^>]*>(.*?)</a>', page, re.S)
    assert chip.startswith('<svg class="icon"') and "notes.txt" in chip
    assert "\U0001f4ce" not in page  # no emoji: a browser without an emoji font draws it too
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules = {m[0].strip(): m[1] for m in re.findall(r"([^{}]+)\{([^}]*)\}", css)}
    assert "align-items: flex-start" in rules[".files"]  # not stretched to a thumbnail's row
    assert "width: 1em" in rules["svg.icon"]


async def test_start_a_thread_is_at_the_top_of_the_threads_page(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        await rt.send("t", "hi")
        async with browser(rt) as client:
            page = (await client.get("/threads")).text
    main = page.split("<main>", 1)[1]
    assert main.index("Start a thread") < main.index('action="/threads"') \
        < main.index('<table class="threads">')
    assert main.index('action="/open-thread"') < main.index('<table class="threads">')


@pytest.mark.parametrize(("outcome", "state", "shown"), [
    ("completed; delivered to slack C1 as 1712345678.000100", "completed",
     "delivered to slack C1 as 1712345678.000100"),
    ("completed (in thread schedule:hourly)", "completed", "in thread schedule:hourly"),
    ("completed; the answer is not delivered yet", "completed",
     "the answer is not delivered yet"),
    ("failed: the model service failed", "failed", "the model service failed"),
    ("queued", "queued", ""),
    ("no run", "no run", ""),
    ("skipped: the run before waits for an approval", "no run",
     "skipped: the run before waits for an approval"),
])
def test_a_slots_outcome_says_what_its_state_does_not(outcome: str, state: str,
                                                      shown: str) -> None:
    assert beyond_state(outcome, state) == shown


async def test_a_fired_slot_shows_its_state_once(tmp_path: Path) -> None:
    slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(slot - timedelta(minutes=5))
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    async with echo_runtime(tmp_path / "m.db") as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            browser(rt, schedules=scheduler) as client:
        clock.now = slot + timedelta(seconds=2)
        (fired,) = await scheduler.fire_due()
        await rt.wait(fired.run.id)
        page = await client.get("/schedules/hourly")
    row = re.search(r"<tr>(.*?)</tr>", page.text.split("<tbody>")[1], re.S)
    assert row, page.text
    cells = [c.strip() for c in texts(row[1], r"<td[^>]*>(.*?)</td>")]
    assert cells == ["2026-03-02T09:00:00+00:00", fired.run.id[-8:], "completed",
                     "in thread schedule:hourly"]
