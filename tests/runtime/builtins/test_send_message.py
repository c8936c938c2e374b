"""The ``send_message`` built-in (runtime/builtins/send_message.py) through the loop, with the
scripted model: a message posted once, waiting in the outbox for its channel, or refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import (
    Origin,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    ToolsConfig,
    make_tools,
)
from tests.fakes.chat import MemoryChat
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.scripted import call

ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")



async def results(rt: Runtime, thread_id: str) -> list[ToolResult]:
    return [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]


def tools(tmp_path: Path, **settings: Any) -> ToolRegistry:
    return make_tools(ToolsConfig.model_validate(settings), tmp_path)


async def test_send_message_posts_once_to_slack(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        from slack_sdk.web.async_client import AsyncWebClient

        from channels.slack.deliverer import SlackDeliverer

        script = [call("send_message", target="slack:C0TEAM00001", text="The weekly summary."),
                  call("send_message", target="irc:#team", text="x"),
                  {"text": "posted it"}]
        chat = MemoryChat()
        slack = SlackDeliverer(AsyncWebClient(token=fake.bot_token, base_url=fake.api_url),
                               pace_s=0)
        async with SQLiteStore(tmp_path / "m.db") as store, Runtime(
                store, ScriptedProvider(script), tools(tmp_path, builtins=["send_message"]),
                deliverers={"slack": slack, "chat": chat}) as rt:
            run = await rt.send("t1", "post the summary to #team", origin=ROOM)
            sent, refused = await results(rt, "t1")
            await rt.idle()
        (posted,) = [m for m in fake.messages("C0TEAM00001") if m.get("user") == BOT_USER]
        assert posted["text"] == "The weekly summary."
        assert sent.content == {"sent": "slack:C0TEAM00001", "message_id": posted["ts"]}
        assert refused.is_error and "is not a target" in str(refused.content)
        assert run.reply == "posted it" and [m.text for m in chat.posted] == ["posted it"]


async def test_send_message_without_the_channel_waits_in_the_outbox(tmp_path: Path) -> None:
    script = [call("send_message", target="discord:123456", text="hello"), {"text": "ok"}]
    async with SQLiteStore(tmp_path / "m.db") as store:
        async with Runtime(store, ScriptedProvider(script),
                           tools(tmp_path, builtins=["send_message"])) as rt:
            await rt.send("t1", "post hello")
            (queued,) = await results(rt, "t1")
            assert queued.content["queued"] == "discord:123456"
            (waiting,) = await rt.records.deliveries(pending=True)
            assert (waiting.channel, waiting.target, waiting.text) == \
                ("discord", {"channel": "123456"}, "hello")
        # A process with Discord connected sends it as it starts (a stand-in deliverer).
        chat = MemoryChat()
        async with Runtime(store, ScriptedProvider([]), deliverers={"discord": chat}) as other:
            assert [m.text for m in chat.posted] == ["hello"]
            assert await other.records.deliveries(pending=True) == []


async def test_send_message_refuses_a_channel_the_agent_is_not_configured_for(
        tmp_path: Path) -> None:
    script = [call("send_message", target="discord:123456", text="hello"), {"text": "ok"}]
    async with SQLiteStore(tmp_path / "m.db") as store, Runtime(
            store, ScriptedProvider(script), tools(tmp_path, builtins=["send_message"]),
            channels=["slack"]) as rt:  # as the app gives it, from the config
        await rt.send("t1", "post hello")
        (refused,) = await results(rt, "t1")
        assert refused.is_error
        assert "refused: discord is not configured for this agent ([channels.discord])" \
            in str(refused.content)
        assert await rt.records.deliveries() == []
