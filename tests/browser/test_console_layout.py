"""The console's layout in a real browser: at a phone's width (420 px) nothing makes the
page wider than the screen (the navigation wraps, a wide table scrolls in its own box), and
at any width a token that must read whole (a date, a crontab, a button's label) is never
broken across lines. Measured in the page, from the rectangles the browser laid out."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runtime import Indexer, KnowledgeConfig, RunState, SQLiteStore
from schedules import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled, served

with contextlib.suppress(ImportError):  # without it every test skips (conftest says why)
    from playwright.async_api import Page

from .test_console_browser import deploy

pytestmark = pytest.mark.asyncio(loop_scope="module")  # where the module's Chromium is driven

NARROW = (420, 800)
WIDE = (1280, 800)

OVERFLOW = """() => {
  const doc = document.documentElement;
  const nav = document.querySelector("header nav");
  return {page: [doc.scrollWidth, doc.clientWidth],
          nav: nav ? [nav.scrollWidth, nav.clientWidth] : null};
}"""

BROKEN = """(patterns) => {
  // Every match of the patterns in the page's text, and on how many lines it was laid out.
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    for (const pattern of patterns) {
      for (const m of node.data.matchAll(new RegExp(pattern, "g"))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                                                         .map(r => Math.round(r.top)));
        found.push([m[0], tops.size]);
      }
    }
  }
  return found;
}"""

WHOLE = [
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d",  # a slot, a next fire
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",  # a moment
    r"\d+ \* \* \* \*",  # the crontab
    r"Run now", r"Index now",  # a button's label
]


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["420px", "1280px"])
async def test_no_page_is_wider_than_the_screen_and_tokens_stay_whole(
        tmp_path: Path, page: Page, console_errors: list[str], viewport: tuple[int, int]
) -> None:
    slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(slot - timedelta(hours=2, minutes=5))
    configs = [ScheduleConfig(name="hourly-report-for-the-team", cron="0 * * * *",
                              prompt="the hourly check")]
    folder = tmp_path / "handbook" / "operations-and-on-call-runbooks-for-the-platform-team"
    folder.mkdir(parents=True)
    (folder / "deploy.md").write_text("# Deploys\n\nMerge, then tag.\n")
    knowledge = [KnowledgeConfig(name="runbooks", path=str(folder.relative_to(tmp_path)))]
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, \
            SQLiteStore(tmp_path / "k.db") as store, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler:
        indexer = Indexer(store, knowledge, tmp_path)
        await indexer.index()  # a row with every column filled
        async with served(rt, schedules=scheduler, knowledge=indexer) as (api, _):
            base = str(api.base_url)
            clock.now = slot + timedelta(seconds=2)
            (fired,) = await scheduler.fire_due()
            await asyncio.wait_for(rt.wait(fired.run.id), 10)
            waiting = await rt.send("slack:T0123:C0456:1712345678.000100",
                                    '/tool deploy {"service": "api"}')
            assert waiting.state is RunState.AWAITING_APPROVAL
            await page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
            paths = ["/", "/approvals", "/threads", "/runs", f"/runs/{waiting.id}",
                     "/schedules", "/schedules/hourly-report-for-the-team", "/spend",
                     "/memory", "/knowledge",
                     "/threads/" + "slack%3AT0123%3AC0456%3A1712345678.000100"]
            seen: dict[str, list[tuple[str, int]]] = {}
            for path in paths:
                await page.goto(base + path)
                sizes = await page.evaluate(OVERFLOW)
                scroll, client = sizes["page"]
                assert scroll <= client, (path, "page", sizes)
                assert sizes["nav"] is not None
                scroll, client = sizes["nav"]
                assert scroll <= client, (path, "nav", sizes)
                seen[path] = [(text, lines) for text, lines
                              in await page.evaluate(BROKEN, WHOLE)]
                broken = [text for text, lines in seen[path] if lines != 1]
                assert broken == [], (path, broken)
            listing = {text for text, _ in seen["/schedules"]}
            assert "0 * * * *" in listing and "Run now" in listing
            assert "2026-03-02T09:00:00+00:00" in listing  # the last slot
            assert "2026-03-02T10:00:00+00:00" in listing  # the next fire
            assert "Index now" in {text for text, _ in seen["/knowledge"]}
    assert console_errors == []
