"""The App Home tab (docs/guides/slack.md, Commands): published when a person opens it, with
their recent threads, the approvals they may decide (the same buttons, which work from
the tab), and this week's usage; published again when one of those changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.channels.slack.test_channel import C, running
from tests.fakes.slack import BOT_USER, FakeSlack, app_home_opened, block_actions_payload


def texts(view: dict[str, Any]) -> list[str]:
    return [str((b.get("text") or {}).get("text") or "") for b in view["blocks"]]


async def test_the_home_tab_shows_threads_and_approvals_and_takes_decisions(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        await fake.acked(await fake.socket_event(app_home_opened("U1")))
        await fake.until(lambda: bool(fake.api.homes.get("U1")), what="a Home tab")
        first = fake.api.homes["U1"][-1]
        assert "Your recent threads" in texts(first)
        assert "_No threads with you yet: mention the bot, or DM it._" in texts(first)

        ask = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "qa"}}',
                              mention=True)
        await fake.acked(await fake.socket_event(ask))
        await s.runtime.idle()
        # At most every EVERY_S (5 s) after the last publish: a longer wait than the fake's.
        await fake.until(lambda: len(fake.api.homes["U1"]) >= 2, what="the tab refreshed",
                         timeout=30)
        shown = fake.api.homes["U1"][-1]
        assert any("waiting for approval" in t or "awaiting approval" in t
                   for t in texts(shown)), texts(shown)
        assert "*deploy* in <#" + C + "> waits for a person" in texts(shown)
        buttons = next(b for b in shown["blocks"] if b["type"] == "actions")["elements"]
        approve = buttons[0]
        click = block_actions_payload("U1", C, "0", approve["action_id"], approve["value"])
        click.pop("channel", None)  # from the Home tab: no channel, no message
        click.pop("message", None)
        click["container"] = {"type": "view", "view_id": "V000000001"}
        await fake.acked(await fake.socket_interactive(click))
        await s.runtime.idle()
        assert await s.runtime.records.pending_approvals() == []  # decided from the tab
        last = fake.api.homes["U1"][-1]
        assert not any(b["type"] == "actions" for b in last["blocks"])
        assert "This week" in texts(last)


async def test_the_home_tab_stays_within_slacks_hundred_blocks(tmp_path: Path) -> None:
    """More approvals than the tab lists: the first 20, and a line counting the rest (a
    Home tab takes at most 100 blocks: docs.slack.dev/reference/block-kit/blocks; the fake
    refuses more)."""
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        for i in range(25):
            ask = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "e{i}"}}',
                                  mention=True)
            await fake.acked(await fake.socket_event(ask))
        await s.runtime.idle()
        assert len(await s.runtime.records.pending_approvals()) == 25
        before = len(fake.api.homes.get("U1", []))
        await fake.acked(await fake.socket_event(app_home_opened("U1")))
        await fake.until(lambda: len(fake.api.homes.get("U1", [])) > before, what="the tab")
        shown = fake.api.homes["U1"][-1]
        assert len(shown["blocks"]) <= 100
        assert sum(b["type"] == "actions" for b in shown["blocks"]) == 20
        assert "_… and 5 more, on the console's approvals page_" in texts(shown)
