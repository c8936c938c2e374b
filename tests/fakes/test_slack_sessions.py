"""The fake's agent sessions (docs.slack.dev/ai/agent-sessions), through the real slack_sdk
client and, for the stop button's ``agent_session_stopped``, bolt over Socket Mode."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import TEAM, FakeSlack, Workspace
from tests.fakes.slack_clients import web

pytestmark = pytest.mark.timeout(20)

CHANNEL, DM, HUMAN = "C0GENERAL1", "D0DIRECT01", "U0HUMAN001"


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_set_status_creates_the_session_and_keeps_its_history(fake: FakeSlack) -> None:
    root = fake.post_as_user(CHANNEL, HUMAN, "find the bug")
    client = web(fake)
    answer = await client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=root["ts"], status="processing", title="The bug",
        initiator_user_id=HUMAN)
    assert (answer["status"], answer["title"]) == ("processing", "The bug")
    # title and initiator count only when the session is created
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=root["ts"],
                                           status="suspended", title="ignored")
    await client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=root["ts"],
                                        title="The real bug")
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=root["ts"],
                                           status="active")
    assert fake.sessions() == {(CHANNEL, root["ts"]): {
        "channel": CHANNEL, "thread_ts": root["ts"], "status": "active",
        "statuses": ["processing", "suspended", "active"], "title": "The real bug",
        "titles": ["The bug", "The real bug"], "initiator_user_id": HUMAN}}


async def test_what_sessions_refuse(fake: FakeSlack) -> None:
    root = fake.post_as_user(DM, HUMAN, "hi")
    reply = fake.post_as_user(DM, HUMAN, "more", thread_ts=root["ts"])
    client = web(fake)
    assert await error_of(client.agents_sessions_rename(
        channel_id=DM, thread_ts=root["ts"], title="t")) == "session_not_found"
    assert await error_of(client.agents_sessions_setStatus(
        channel_id=DM, thread_ts=root["ts"], status="thinking")) == "invalid_status"
    assert await error_of(client.agents_sessions_setStatus(
        channel_id=DM, status="processing")) == "thread_ts_required"
    assert await error_of(client.agents_sessions_setStatus(  # a reply is not the thread
        channel_id=DM, thread_ts=reply["ts"], status="processing")) == "invalid_arguments"
    await client.agents_sessions_setStatus(channel_id=DM, thread_ts=root["ts"],
                                           status="closed")
    assert await error_of(client.agents_sessions_rename(
        channel_id=DM, thread_ts=root["ts"], title="x" * 201)) == "invalid_arguments"
    assert fake.sessions()[(DM, root["ts"])]["statuses"] == ["closed"]


async def test_sessions_need_chat_write() -> None:
    async with FakeSlack(Workspace(scopes=("assistant:write",))) as fake:
        root = fake.post_as_user(DM, HUMAN, "hi")
        with pytest.raises(SlackApiError) as caught:
            await web(fake).agents_sessions_setStatus(channel_id=DM, thread_ts=root["ts"],
                                                      status="processing")
        assert (caught.value.response["error"], caught.value.response["needed"]) == (
            "missing_scope", "chat:write")


async def stream(client: AsyncWebClient, thread_ts: str, text: str | None = None) -> str:
    """A stream opened in ``thread_ts`` of CHANNEL, to HUMAN; its ``ts``."""
    started = await client.chat_startStream(channel=CHANNEL, thread_ts=thread_ts,
                                            markdown_text=text, recipient_user_id=HUMAN,
                                            recipient_team_id=TEAM)
    return str(started["ts"])


async def test_stop_stops_the_threads_streams_and_sends_the_event(fake: FakeSlack) -> None:
    root = fake.post_as_user(CHANNEL, HUMAN, "write a novel")
    other = fake.post_as_user(CHANNEL, HUMAN, "another thread")
    client = web(fake)
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=root["ts"],
                                           status="processing")
    done = await stream(client, root["ts"])
    # (a stream ended while the work goes on: the session stays processing)
    await client.chat_stopStream(channel=CHANNEL, ts=done, session_status="processing")
    running = await stream(client, root["ts"], "Chapter 1")
    elsewhere = await stream(client, other["ts"])

    payload = fake.session_stopped(CHANNEL, root["ts"], HUMAN)
    assert payload["type"] == "event_callback" and payload["team_id"] == TEAM
    assert payload["event_id"]
    event = payload["event"]
    assert {k: v for k, v in event.items() if k != "event_ts"} == {
        "type": "agent_session_stopped", "channel": CHANNEL, "thread_ts": root["ts"],
        "user": HUMAN, "streaming_message_ts": [running]}
    assert event["event_ts"] > running

    assert await error_of(client.chat_appendStream(
        channel=CHANNEL, ts=running, markdown_text="more")) == "stopped_by_user"
    await client.chat_appendStream(channel=CHANNEL, ts=elsewhere, markdown_text="ok")
    # the status is the app's to change: a click leaves it as it was
    assert fake.sessions()[(CHANNEL, root["ts"])]["status"] == "processing"
    await client.chat_stopStream(channel=CHANNEL, ts=running)  # the app may still end it
    assert await error_of(client.chat_stopStream(
        channel=CHANNEL, ts=running)) == "message_not_in_streaming_state"
    # ending it without a session_status makes the session active (Slack's default)
    assert fake.sessions()[(CHANNEL, root["ts"])]["statuses"] == [
        "processing", "processing", "active"]
    again = fake.session_stopped(CHANNEL, root["ts"], HUMAN)
    assert again["event"]["streaming_message_ts"] == []


async def test_stop_stream_sets_the_threads_session(fake: FakeSlack) -> None:
    """``chat.stopStream``'s ``session_status`` (default ``active``) is the session's next
    status; a thread without a session gets none; a status not among the four is refused."""
    root = fake.post_as_user(CHANNEL, HUMAN, "deploy it")
    bare = fake.post_as_user(CHANNEL, HUMAN, "no session here")
    client = web(fake)
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=root["ts"],
                                           status="processing")
    assert await error_of(client.chat_stopStream(
        channel=CHANNEL, ts=await stream(client, root["ts"]),
        session_status="done")) == "invalid_arguments"
    await client.chat_stopStream(channel=CHANNEL, ts=await stream(client, root["ts"]),
                                 session_status="suspended")
    await client.chat_stopStream(channel=CHANNEL, ts=await stream(client, root["ts"]),
                                 session_status="closed")
    await client.chat_stopStream(channel=CHANNEL, ts=await stream(client, bare["ts"]))
    assert fake.sessions()[(CHANNEL, root["ts"])]["statuses"] == [
        "processing", "suspended", "closed"]
    assert (CHANNEL, bare["ts"]) not in fake.sessions()


async def test_bolt_receives_agent_session_stopped(fake: FakeSlack) -> None:
    app = AsyncApp(client=web(fake))
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @app.event("agent_session_stopped")
    async def stopped(event: dict[str, Any]) -> None:
        await seen.put(event)

    root = fake.post_as_user(DM, HUMAN, "hi")
    handler = AsyncSocketModeHandler(app, fake.app_token)
    try:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt: untyped
        await fake.acked(await fake.socket_event(fake.session_stopped(DM, root["ts"], HUMAN)))
        event = await seen.get()
        assert (event["channel"], event["thread_ts"], event["user"]) == (DM, root["ts"], HUMAN)
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
