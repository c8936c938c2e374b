"""Where a Slack message is private, and who said it (docs/guides/memory-and-knowledge.md,
"Where the platform says whether a place is private"): an ``app_mention`` carries no
``channel_type``, so its channel is asked of ``conversations.info`` (kept minutes; private
without an answer); a message event's ``channel_type`` is taken as it is; the sender's
name comes from ``users.info`` and is the source of what they teach the agent. Through the
fake Slack with the real slack-bolt and slack-sdk, and the echo model calling the memory
tools."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.lookups import SlackPrivacy
from channels.slack.zones import SlackZones
from runtime import Run, ToolRegistry, ToolResult, ToolsConfig, make_tools
from tests.channels.slack.test_channel import C, Slack, running
from tests.fakes.slack import BOT_USER, SCOPES, FakeSlack, Workspace

PRIVATE = "C0SECRET001"
"""A private channel with a C id, as every channel made since March 2021 has."""
OTHER = "C0RANDOM001"


def memory_tools(tmp_path: Path) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate({"builtins": ["memory"]}), tmp_path)


async def mention(s: Slack, channel: str, user: str, text: str) -> Run:
    """``user`` mentions the bot in ``channel`` with ``text``; the run it made, finished."""
    sent = s.fake.user_event(channel, user, f"<@{BOT_USER}> {text}", mention=True)
    await s.fake.acked(await s.fake.socket_event(sent))
    await s.runtime.idle()
    team = s.fake.workspace.team_id
    (run,) = await s.runtime.records.runs(
        thread_id=f"slack:{team}:{channel}:{sent['event']['ts']}")
    return run


async def tool(s: Slack, channel: str, user: str, name: str, **args: Any) -> Any:
    """What the memory tool ``name`` answered, called in a mention of ``user``'s."""
    run = await mention(s, channel, user, f"/tool {name} {json.dumps(args)}")
    (result,) = [e for e in await s.runtime.records.entries(run.thread_id)
                 if isinstance(e, ToolResult) and e.run_id == run.id]
    return result.content


async def test_a_mention_in_a_public_channel_is_recalled_elsewhere_a_private_one_is_not(
        tmp_path: Path) -> None:
    async with FakeSlack(agent=False) as fake:
        fake.person("U1", tz="UTC", name="Ana")
        fake.conversation(PRIVATE, "group")
        async with running(fake, tmp_path / "m.db", stream="off",
                           registry=memory_tools(tmp_path)) as s:
            await tool(s, C, "U1", "remember", text="Ana takes her coffee black",
                       scope="person")
            await tool(s, PRIVATE, "U1", "remember", text="Ana's review is in May",
                       scope="person")
            found = await tool(s, OTHER, "U1", "recall", query="Ana")
            assert [m["text"] for m in found["memories"]] == ["Ana takes her coffee black"]
            # The source names her as Slack shows her, not by her id.
            assert found["memories"][0]["source"].startswith(f"Ana, slack #{C}, ")
            mine = await tool(s, PRIVATE, "U1", "recall", query="Ana")
            assert sorted(m["text"] for m in mine["memories"]) == [
                "Ana takes her coffee black", "Ana's review is in May"]
            runs = {r.origin.place[0]: r.origin for r in await s.runtime.records.runs()}
            assert (runs[C].private, runs[PRIVATE].private, runs[OTHER].private) == (
                False, True, False)
            assert runs[C].user_name == "Ana"
        # Each channel asked once (kept), each person once.
        assert sorted(c["channel"] for c in fake.calls("conversations.info")) == sorted(
            [C, PRIVATE, OTHER])
        assert [c["user"] for c in fake.calls("users.info")] == ["U1"]


async def test_a_message_event_says_its_channel_type_and_is_not_asked(
        tmp_path: Path) -> None:
    async with FakeSlack(agent=False) as fake, running(fake, tmp_path / "m.db",
                                                      stream="off") as s:
        # Slack says the channel is private; the message event's channel_type says public:
        # the event is taken at its word (it is Slack's, for this message).
        fake.conversation(C, "group")
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> hello", channel_type="channel")
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (run,) = await s.runtime.records.runs()
        assert run.origin.private is False
        assert fake.calls("conversations.info") == []
        # Not set up in users.info: the person goes by their id.
        assert run.origin.user_name is None and run.origin.user == "U1"


async def test_without_the_read_scopes_a_mention_is_private_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lacking = tuple(s for s in SCOPES if not s.endswith(":read") or s == "files:read")
    async with FakeSlack(Workspace(scopes=lacking), agent=False) as fake, \
            running(fake, tmp_path / "m.db", stream="off") as s:
        with caplog.at_level(logging.WARNING, logger="maiden.slack"):
            first = await mention(s, C, "U1", "hello")
            second = await mention(s, C, "U1", "again")
        assert first.origin.private and second.origin.private
        assert first.origin.user_name is None
        warned = [r.getMessage() for r in caplog.records if "conversations.info" in r.message
                  or "conversations.info" in r.getMessage()]
        assert len(warned) == 1, warned
        assert "missing_scope" in warned[0] and "channels:read" in warned[0]
        # Not kept: each mention asks again, in case the scope was granted meanwhile.
        assert len(fake.calls("conversations.info")) == 2


async def test_a_channel_made_private_is_private_once_what_was_kept_is_old() -> None:
    now = [0.0]
    async with FakeSlack() as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        privacy = SlackPrivacy(client, clock=lambda: now[0])
        fake.post_as_user(C, "U1", "hi")
        fake.post_as_user(OTHER, "U1", "hi")
        assert await privacy.private(C) is False
        fake.conversation(C, "group")
        now[0] = privacy.keep_s - 1
        assert await privacy.private(C) is False  # kept
        now[0] = privacy.keep_s + 1
        assert await privacy.private(C) is True
        for kind in ("mpim", "channel"):
            fake.conversation(OTHER, kind)
            now[0] += privacy.keep_s + 1
            assert await privacy.private(OTHER) is (kind == "mpim")
        assert await privacy.private("C0NOWHERE") is True  # channel_not_found
        fake.post_as_user("D0DIRECT001", "U1", "hi")
        assert await privacy.private("D0DIRECT001") is True  # im:read: not asked for
        assert fake.calls("conversations.info")[-1]["channel"] == "D0DIRECT001"
        await privacy.close()


async def test_a_name_is_the_display_name_else_the_real_name() -> None:
    async with FakeSlack() as fake:
        fake.person("U1", tz="UTC", name="Ana")
        fake.people.by_id["U1"]["profile"]["display_name"] = ""  # optional in Slack
        fake.people.by_id["U1"]["profile"]["real_name"] = "Ana Lima"
        fake.person("U2", tz="UTC", name="Bo")
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        people = SlackZones(client)
        assert (await people.name("U1"), await people.name("U2"),
                await people.name("U0NOBODY")) == ("Ana Lima", "Bo", None)
        assert await people("U1") == "UTC"  # the same call gave the zone
        assert len(fake.calls("users.info")) == 3
        await people.close()


async def test_a_slow_answer_is_not_waited_for_past_the_ack(tmp_path: Path) -> None:
    """Rate limited, the client sleeps Retry-After before asking again: the mention does
    not wait (Slack wants its ack within 3 seconds); it is private, and the answer that
    comes later is kept for the next mention."""
    async with FakeSlack(agent=False) as fake, running(fake, tmp_path / "m.db",
                                                      stream="off") as s:
        fake.fail("conversations.info", status=429, retry_after=3)
        started = time.monotonic()
        first = await mention(s, C, "U1", "hello")
        assert first.origin.private is True
        assert time.monotonic() - started < 3.0
        await fake.until(lambda: len(fake.calls("conversations.info")) == 2,
                         what="the ask made again after Retry-After")
        await asyncio.sleep(0.5)  # its answer kept, just after the call is answered
        second = await mention(s, C, "U1", "again")
        assert second.origin.private is False
        assert len(fake.calls("conversations.info")) == 2
