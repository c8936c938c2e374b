"""The operator console in a real browser (headless Chromium through Playwright): htmx and
its SSE extension under the pages' CSP, forms, redirects and live updates; screenshots of
the main pages (into each test's tmp_path, or docs/ with ``MAIDEN_SCREENSHOTS=docs``, for the
docs' console page).

Each test serves the console from an in-process server over an echo model (the same
helpers as the HTTP tests) and waits on what the page shows, never on a fixed sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from runtime import (
    EchoProvider,
    Prices,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolsConfig,
    make_tools,
    tool,
)
from schedules import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled, served, tokens

with contextlib.suppress(ImportError):  # without it every test skips (conftest says why)
    from playwright.async_api import Page, expect

pytestmark = pytest.mark.asyncio(loop_scope="module")  # where the module's Chromium is driven

WAIT_S = 10.0
"""How long a test waits for a run to end."""


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


@tool(effect="read_only", timeout_s=60)
async def slow(q: str) -> str:
    """Look something up, slowly (until the run is cancelled)."""
    await asyncio.Event().wait()  # never set
    return q


async def screenshot(page: Page, shots: Path, name: str) -> None:
    """A full-page screenshot as console-<name>.png in ``shots`` (the ``shots`` fixture)."""
    await page.screenshot(path=shots / f"console-{name}.png", full_page=True)


def thread_page(base: str, thread_id: str) -> str:
    return f"{base}/threads/{quote(thread_id, safe='')}"


async def test_send_a_message_and_see_the_reply_stream_in(
        tmp_path: Path, page: Page, console_errors: list[str], shots: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        base = str(api.base_url)
        await rt.send("ops", '/tool clock {"tz": "UTC"}')
        await rt.send("ops", "what did the clock say?")
        await page.goto(thread_page(base, "ops"))
        conversation = page.locator("#conversation")
        await expect(conversation.locator(".entry.user")).to_have_count(2)
        await expect(conversation).to_contain_text("echo: what did the clock say?")

        box = page.locator("#send textarea[name=text]")
        await box.fill("hello from the browser")
        await page.locator("#send").get_by_role("button", name="Send").click()
        replies = page.locator("#replies")
        await expect(replies.locator(".entry.user")).to_have_text(
            re.compile("hello from the browser"))
        ended = replies.locator(".entry.assistant.ended")
        await expect(ended).to_contain_text("echo: hello from the browser")
        await expect(ended.locator(".state")).to_have_text("completed")
        await expect(replies.locator(".entry.assistant.live")).to_have_count(0)
        await expect(box).to_have_value("")  # console.js empties the box once sent
        (run,) = await rt.records.runs(thread_id="ops", states=[RunState.COMPLETED], limit=1)
        assert run.origin.channel == "console" and run.reply == "echo: hello from the browser"
        assert page.url == thread_page(base, "ops")  # htmx swapped it in: no navigation
        await screenshot(page, shots, "thread")
        assert console_errors == []


async def test_a_tool_result_shows_in_the_thread(tmp_path: Path, page: Page) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        await rt.send("ops", '/tool clock {"tz": "UTC"}')
        await page.goto(thread_page(str(api.base_url), "ops"))
        conversation = page.locator("#conversation")
        await expect(conversation.locator(".entry.assistant .call")).to_contain_text("clock")
        await expect(conversation.locator(".entry.notice")).to_have_count(0, timeout=1000)
        result = conversation.locator(".entry.tool")
        await expect(result).to_have_count(1, timeout=1000)
        await expect(result.locator("summary")).to_contain_text("clock result")


async def test_send_in_a_thread_that_does_not_exist_yet(
        tmp_path: Path, page: Page, console_errors: list[str]) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        base = str(api.base_url)
        response = await page.goto(thread_page(base, "brand new"))
        assert response is not None and response.status == 404
        await page.locator("#send textarea[name=text]").fill("first words")
        await page.locator("#send").get_by_role("button", name="Send").click()
        await expect(page.locator("#replies .entry.assistant.ended")).to_contain_text(
            "echo: first words")
        await page.reload()
        await expect(page.locator("#conversation .entry.assistant")).to_contain_text(
            "echo: first words")
        # Chromium logs the first page's 404 status as an error, and nothing else.
        assert [e for e in console_errors if "/threads/brand%20new)" not in e] == []


async def test_approve_from_the_approvals_page(
        tmp_path: Path, page: Page, console_errors: list[str], shots: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, served(rt) as (api, _):
        base = str(api.base_url)
        other = await rt.send("releases", '/tool deploy {"service": "billing"}')
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        assert run.state is RunState.AWAITING_APPROVAL
        await page.goto(f"{base}/approvals")
        card = page.locator(f'article.approval[data-run="{run.id}"]')
        await expect(card).to_contain_text("deploy")
        await expect(card.locator("pre.arguments")).to_contain_text('"service": "api"')
        await expect(page.locator("article.approval")).to_have_count(2)
        await screenshot(page, shots, "approvals")

        await card.get_by_role("button", name="Approve").click()
        await expect(page).to_have_url(f"{base}/approvals?decided={run.id}")
        await expect(page.get_by_role("status")).to_contain_text("Decided for run")
        await expect(page.locator(f'article.approval[data-run="{run.id}"]')).to_have_count(0)
        await expect(page.locator(f'article.approval[data-run="{other.id}"]')).to_have_count(1)
        done = await asyncio.wait_for(rt.wait(run.id), WAIT_S)
        assert done.state is RunState.COMPLETED and done.reply == 'deploy returned "deployed api"'

        await page.goto(f"{base}/runs/{run.id}")
        await expect(page.locator("#run-state")).to_have_text(re.compile(r"^\s*completed"))
        assert (await rt.records.get_run(other.id)).state is RunState.AWAITING_APPROVAL
        assert console_errors == []


async def test_cancel_a_running_run_from_the_now_page(
        tmp_path: Path, page: Page, console_errors: list[str], shots: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [slow, deploy]) as rt, served(rt) as (api, _):
        base = str(api.base_url)
        await rt.send("ops", "good morning")
        await rt.send("releases", '/tool deploy {"service": "api"}')  # 1 approval waiting
        await page.goto(f"{base}/")
        now = page.locator("#now")
        await expect(now.locator("#in-progress tr[data-run]")).to_have_count(1)  # approval's
        await expect(now).to_contain_text("No queue.")

        run = await rt.submit("research", '/tool slow {"q": "x"}')
        behind = await rt.submit("ops", "and then?")  # one loop at a time: it queues
        row = page.locator(f'#in-progress tr[data-run="{run.id}"]')
        await expect(row).to_be_visible()  # the live panel brought it in, no reload
        await expect(row).to_contain_text("slow")
        await expect(now).to_contain_text("1 approval waiting")
        await expect(now.locator(f'a[href="/runs/{behind.id}"]')).to_be_visible()
        await screenshot(page, shots, "now")

        await row.get_by_role("button", name="Cancel").click()
        await expect(page).to_have_url(f"{base}/")
        cancelled = await asyncio.wait_for(rt.wait(run.id), WAIT_S)
        assert cancelled.state is RunState.CANCELLED
        assert (await asyncio.wait_for(rt.wait(behind.id), WAIT_S)).state is \
            RunState.COMPLETED
        await expect(row).to_have_count(0)
        await expect(now.locator("#in-progress tr[data-run]")).to_have_count(1)
        await expect(now).to_contain_text("No queue.")
        await page.goto(f"{base}/runs/{run.id}")
        await expect(page.locator("#run-state")).to_have_text(re.compile(r"^\s*cancelled"))
        assert console_errors == []


async def test_a_schedules_page_shows_its_slots(
        tmp_path: Path, page: Page, console_errors: list[str], shots: Path) -> None:
    slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(slot - timedelta(hours=2, minutes=5))
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    async with echo_runtime(tmp_path / "m.db") as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            served(rt, schedules=scheduler) as (api, _):
        base = str(api.base_url)
        clock.now = slot + timedelta(seconds=2)
        (fired,) = await scheduler.fire_due()
        await asyncio.wait_for(rt.wait(fired.run.id), WAIT_S)
        await page.goto(f"{base}/schedules")
        await page.get_by_role("link", name="hourly", exact=True).click()
        await expect(page).to_have_url(f"{base}/schedules/hourly")
        rows = page.locator("#slots tbody tr")
        await expect(rows).to_have_count(3)
        await expect(rows.nth(0)).to_contain_text("2026-03-02T09:00:00+00:00")
        await expect(rows.nth(0)).to_contain_text("completed")
        await expect(rows.nth(0).locator(f'a[href="/runs/{fired.run.id}"]')) \
            .to_be_visible()
        await expect(rows.nth(1)).to_contain_text("2026-03-02T08:00:00+00:00")
        await expect(rows.nth(2)).to_contain_text("2026-03-02T07:00:00+00:00")
        await expect(rows.nth(1)).to_contain_text("no run")
        await screenshot(page, shots, "schedule")
        assert console_errors == []


@asynccontextmanager
async def priced_runtime(db: Path, offset: list[float]) -> AsyncIterator[Runtime]:
    """An echo runtime whose model has prices and whose clock runs ``offset[0]`` seconds
    off the real one (so runs can be made on past days)."""
    store = SQLiteStore(db)
    runtime = Runtime(store, EchoProvider(), make_tools(ToolsConfig(), db.parent),
                      prices=Prices(input=3.0, output=15.0),
                      settings=RuntimeConfig(poll_interval_s=0.1),
                      clock=lambda: time.time() + offset[0])
    async with store, runtime:
        yield runtime


async def test_the_spend_charts_render(
        tmp_path: Path, page: Page, console_errors: list[str], shots: Path) -> None:
    offset = [0.0]
    async with priced_runtime(tmp_path / "m.db", offset) as rt, served(rt) as (api, _):
        base = str(api.base_url)
        for day, messages in enumerate([2, 5, 3, 0, 6, 4, 3]):  # the last six days, today
            offset[0] = (day - 6) * 86_400.0
            for i in range(messages):
                await rt.send(f"team-{i % 3}", f"the report for day {day}, part {i}")
        offset[0] = 0.0
        await page.goto(f"{base}/spend?days=7")
        for chart in ("#cost-chart", "#tokens-chart"):
            svg = page.locator(f"figure{chart} svg.chart")
            await expect(svg.locator("rect.bar")).to_have_count(7)
            box = await svg.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 20, (chart, box)
        await expect(page.locator("main")).to_contain_text("23 runs")
        await screenshot(page, shots, "spend")
        await page.get_by_role("link", name="30 days").click()
        await expect(page).to_have_url(f"{base}/spend?days=30")
        await expect(page.locator("figure#tokens-chart svg.chart rect.bar")).to_have_count(30)
        assert console_errors == []


async def test_sign_in_with_the_token(
        tmp_path: Path, page: Page, console_errors: list[str]) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=tokens(("alice", "tok"))) as (api, _):
        base = str(api.base_url)
        await page.goto(f"{base}/runs?state=completed")
        await expect(page).to_have_url(re.compile(re.escape(f"{base}/sign-in?next=")))
        await page.locator("input[name=token]").fill("wrong")
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("alert")).to_have_text("That is not one of the tokens.")
        await page.locator("input[name=token]").fill("tok")
        await expect(page.locator("input[name=operator]")).to_have_count(0)  # the token names you
        await page.get_by_role("button", name="Sign in").click()
        await expect(page).to_have_url(f"{base}/runs?state=completed")
        await expect(page.locator("h1")).to_have_text("Runs")
        await expect(page.locator("header .who")).to_contain_text("alice")
        # The wrong token's answer is a 401 page, which Chromium logs; nothing else is.
        assert [e for e in console_errors if "/sign-in)" not in e] == []
