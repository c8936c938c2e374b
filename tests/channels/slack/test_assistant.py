"""The assistant view: suggested prompts when a person opens an assistant thread, and the
thread's title from its first message (docs/guides/slack.md), against the fake Slack."""

from __future__ import annotations

from pathlib import Path

from tests.channels.slack.test_channel import D, running
from tests.fakes.slack import BOT_USER, FakeSlack

PROMPTS = ["Summarise what happened in #ops today", "What is on my calendar?"]


async def test_an_opened_assistant_thread_gets_prompts_and_its_title(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db",
                                            suggested_prompts=PROMPTS) as s:
        root = fake.post_as_user(D, BOT_USER, "Hi, how can I help?")
        started = {"type": "assistant_thread_started", "assistant_thread": {
            "user_id": "U1", "channel_id": D, "thread_ts": root["ts"], "context": {}}}
        await fake.acked(await fake.socket_event(started))
        await fake.until(lambda: bool(fake.api.suggested), what="the suggested prompts")
        (offered,) = fake.api.suggested
        assert offered["channel_id"] == D and offered["thread_ts"] == root["ts"]
        assert [p["message"] for p in offered["prompts"]] == PROMPTS
        assert offered["prompts"][0]["title"] == "Summarise what happened in #ops today"
        asked = fake.user_event(D, "U1", "What is on my calendar this week?",
                                thread_ts=root["ts"], channel_type="im")
        await fake.acked(await fake.socket_event(asked))
        await fake.until(lambda: bool(fake.api.titles), what="the thread's title")
        await s.runtime.idle()
        asked_again = fake.user_event(D, "U1", "and next week?", thread_ts=root["ts"],
                                      channel_type="im")
        await fake.acked(await fake.socket_event(asked_again))
        await s.runtime.idle()
    assert fake.api.titles == [{"channel_id": D, "thread_ts": root["ts"],
                                "title": "What is on my calendar this week?"}]  # once


async def test_without_prompts_configured_none_are_offered(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db") as s:
        root = fake.post_as_user(D, BOT_USER, "Hi")
        started = {"type": "assistant_thread_started", "assistant_thread": {
            "user_id": "U1", "channel_id": D, "thread_ts": root["ts"], "context": {}}}
        await fake.acked(await fake.socket_event(started))
        await s.runtime.idle()
    assert fake.api.suggested == []
