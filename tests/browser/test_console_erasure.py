"""A thread's Export link and Delete button in a real browser (headless Chromium): the
export downloads as JSON lines; the Delete form unfolds, will not go without its box ticked,
and then erases the thread. Waits on what the page shows, never on a fixed sleep."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.http_helpers import echo_runtime, served

with contextlib.suppress(ImportError):  # without it every test skips (conftest says why)
    from playwright.async_api import Page, expect

pytestmark = pytest.mark.asyncio(loop_scope="module")  # where the module's Chromium is driven


async def test_export_then_delete_a_thread_from_its_page(
        tmp_path: Path, page: Page, console_errors: list[str]) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        await rt.send("ops/2024", "remember the deploy window")
        await rt.send("stays", "another thread")
        await page.goto(f"{api.base_url}/threads/{quote('ops/2024', safe='')}")

        async with page.expect_download() as downloading:
            await page.locator("#export").click()
        download = await downloading.value
        assert download.suggested_filename == "ops_2024.jsonl"  # its name, made safe
        saved = await download.path()
        lines = [json.loads(line) for line in saved.read_text().splitlines()]
        assert lines[0]["thread_id"] == "ops/2024"
        assert lines[1]["entry"]["text"] == "remember the deploy window"

        erase = page.locator("#erase")
        button = erase.get_by_role("button", name="Delete thread")
        await expect(button).to_be_hidden()  # folded away until asked for
        await erase.locator("summary").click()
        await button.click()  # the box is not ticked: the browser keeps the form
        await expect(page.locator("h1")).to_contain_text("Thread")
        assert await rt.records.runs(thread_id="ops/2024") != []

        await erase.get_by_role("checkbox").check()
        await button.click()
        await expect(page.locator("h1")).to_have_text("Thread deleted")
        await expect(page.locator("#deleted")).to_contain_text("1 run,")
        assert await rt.records.runs(thread_id="ops/2024") == []
        assert [t.id for t in await rt.records.threads()] == ["stays"]
        assert console_errors == []
