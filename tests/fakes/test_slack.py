"""The fake Slack, driven only by the real slack-sdk clients (and bolt, for what bolt checks).

What the Slack channel's tests will lean on: messages and their metadata round-trip, pages
come the way slack-sdk walks them, faults reach the client the way Slack's would (429 retried
by slack-sdk's own handler, a dropped answer as a connection error after the post was stored),
and Socket Mode speaks the protocol slack-sdk's client expects: hello, envelopes, acks,
disconnect and reconnect.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncSay
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import (
    BOT,
    BOT_USER,
    TEAM,
    FakeSlack,
    Workspace,
    app_mention_event,
    block_actions_payload,
    event_callback,
    message_event,
    signed_event,
    signed_interaction,
    url_verification,
)

pytestmark = pytest.mark.timeout(20)

CHANNEL = "C0GENERAL1"
DM = "D0DIRECT01"
HUMAN = "U0HUMAN001"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def client(fake: FakeSlack, **kwargs: Any) -> AsyncWebClient:
    kwargs.setdefault("token", fake.bot_token)
    return AsyncWebClient(base_url=fake.api_url, **kwargs)


# -- Web API: messages, threads, metadata


async def test_a_post_and_its_replies_round_trip_metadata(fake: FakeSlack) -> None:
    web = client(fake)
    root = fake.post_as_user(CHANNEL, HUMAN, "hello bot")
    meta = {"event_type": "maiden_turn", "event_payload": {"thread": "t1", "seq": 1}}
    posted = await web.chat_postMessage(channel=CHANNEL, thread_ts=root["ts"], text="hi!",
                                        metadata=meta)
    assert posted["ok"] and posted["channel"] == CHANNEL
    assert posted["ts"] > root["ts"]
    assert posted["message"]["thread_ts"] == root["ts"]
    # a bot token's posts carry the bot's ids, so an adapter can tell its own messages
    assert posted["message"]["bot_id"] == BOT and posted["message"]["user"] == BOT_USER

    with_meta = await web.conversations_replies(channel=CHANNEL, ts=root["ts"],
                                                include_all_metadata=True)
    assert [m["text"] for m in with_meta["messages"]] == ["hello bot", "hi!"]
    assert with_meta["messages"][1]["metadata"] == meta
    assert with_meta["messages"][0]["reply_count"] == 1

    without = await web.conversations_replies(channel=CHANNEL, ts=root["ts"])
    assert "metadata" not in without["messages"][1]
    assert fake.messages(CHANNEL)[1]["metadata"] == meta


async def test_a_form_encoded_post_is_read_like_a_json_one(fake: FakeSlack) -> None:
    web = client(fake)
    meta = {"event_type": "maiden_turn", "event_payload": {"seq": 2}}
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}}]
    response = await web.api_call("chat.postMessage", data={
        "channel": CHANNEL, "text": "hi", "metadata": json.dumps(meta),
        "blocks": json.dumps(blocks)})
    assert response["message"]["blocks"] == blocks
    assert fake.calls("chat.postMessage") == [
        {"channel": CHANNEL, "text": "hi", "metadata": meta, "blocks": blocks}]


async def test_history_pages_newest_first_and_replies_pages_repeat_the_root(
        fake: FakeSlack) -> None:
    web = client(fake)
    roots = [fake.post_as_user(CHANNEL, HUMAN, f"root {i}") for i in range(5)]
    for i in range(5):
        await web.chat_postMessage(channel=CHANNEL, thread_ts=roots[0]["ts"], text=f"r{i}")

    # slack-sdk's pager reuses one response object: read each page as it comes
    pages = [([m["text"] for m in page["messages"]], page["has_more"])
             async for page in await web.conversations_history(channel=CHANNEL, limit=2)]
    assert pages == [(["root 4", "root 3"], True), (["root 2", "root 1"], True),
                     (["root 0"], False)]

    newer = await web.conversations_history(channel=CHANNEL, oldest=roots[2]["ts"])
    assert [m["text"] for m in newer["messages"]] == ["root 4", "root 3"]

    texts = [[m["text"] for m in page["messages"]] async for page in
             await web.conversations_replies(channel=CHANNEL, ts=roots[0]["ts"], limit=3)]
    assert texts == [["root 0", "r0", "r1"], ["root 0", "r2", "r3"], ["root 0", "r4"]]

    with pytest.raises(SlackApiError) as caught:
        await web.conversations_replies(channel=CHANNEL, ts=roots[0]["ts"], cursor="bogus")
    assert caught.value.response["error"] == "invalid_cursor"


async def test_update_ephemeral_and_reactions(fake: FakeSlack) -> None:
    web = client(fake)
    posted = await web.chat_postMessage(channel=CHANNEL, text="thinking")
    updated = await web.chat_update(channel=CHANNEL, ts=posted["ts"], text="done")
    assert updated["message"]["text"] == "done" and "edited" in updated["message"]
    assert [m["text"] for m in fake.messages(CHANNEL)] == ["done"]

    human = fake.post_as_user(CHANNEL, HUMAN, "mine")
    with pytest.raises(SlackApiError) as caught:
        await web.chat_update(channel=CHANNEL, ts=human["ts"], text="not yours")
    assert caught.value.response["error"] == "cant_update_message"

    ephemeral = await web.chat_postEphemeral(channel=CHANNEL, user=HUMAN, text="psst")
    assert fake.ephemerals(CHANNEL)[0]["message_ts"] == ephemeral["message_ts"]
    assert len(fake.messages(CHANNEL)) == 2

    await web.reactions_add(channel=CHANNEL, name="eyes", timestamp=human["ts"])
    with pytest.raises(SlackApiError) as caught:
        await web.reactions_add(channel=CHANNEL, name="eyes", timestamp=human["ts"])
    assert caught.value.response["error"] == "already_reacted"
    assert fake.messages(CHANNEL)[1]["reactions"] == [
        {"name": "eyes", "users": [BOT_USER], "count": 1}]
    await web.reactions_remove(channel=CHANNEL, name="eyes", timestamp=human["ts"])
    with pytest.raises(SlackApiError) as caught:
        await web.reactions_remove(channel=CHANNEL, name="eyes", timestamp=human["ts"])
    assert caught.value.response["error"] == "no_reaction"


@pytest.mark.parametrize(("call", "error"), [
    ({"channel": CHANNEL}, "no_text"),
    ({"channel": "#general", "text": "x"}, "channel_not_found"),
    ({"channel": CHANNEL, "text": "x", "thread_ts": "1.000001"}, "invalid_thread_ts"),
    ({"channel": CHANNEL, "text": "x", "metadata": {"event_type": "t"}},
     "invalid_metadata_format"),
])
async def test_post_message_refuses_what_slack_refuses(fake: FakeSlack, call: dict[str, Any],
                                                        error: str) -> None:
    with pytest.raises(SlackApiError) as caught:  # api_call: no client-side checks first
        await client(fake).api_call("chat.postMessage", json=call)
    assert caught.value.response.status_code == 200
    assert caught.value.response["error"] == error
    assert fake.messages(CHANNEL) == []


# -- Web API: auth, scopes, methods


async def test_auth_test_answers_the_bot_and_its_scopes_header(fake: FakeSlack) -> None:
    response = await client(fake).auth_test()
    assert (response["team_id"], response["user_id"], response["bot_id"]) == (TEAM, BOT_USER,
                                                                                BOT)
    assert response["url"] == "https://maiden-test.slack.com/"
    assert set(response.headers["x-oauth-scopes"].split(",")) == set(fake.workspace.scopes)


@pytest.mark.parametrize(("token", "error"), [
    (None, "not_authed"), ("xoxb-wrong", "invalid_auth"),
    ("xapp-1-A0FAKEAPP1-1-fake-app-token", "not_allowed_token_type")])
async def test_tokens_are_checked(fake: FakeSlack, token: str | None, error: str) -> None:
    with pytest.raises(SlackApiError) as caught:
        await AsyncWebClient(token=token, base_url=fake.api_url).chat_postMessage(
            channel=CHANNEL, text="x")
    assert caught.value.response["error"] == error
    assert fake.messages(CHANNEL) == []


async def test_a_token_in_a_form_body_is_read(fake: FakeSlack) -> None:
    web = AsyncWebClient(base_url=fake.api_url)  # no header: the token travels in the form
    await web.api_call("chat.postMessage", data={"token": fake.bot_token, "channel": CHANNEL,
                                                 "text": "form"})
    assert "authorization" not in fake.requests[0].headers
    assert fake.calls("chat.postMessage") == [{"channel": CHANNEL, "text": "form"}]


async def test_a_missing_scope_is_named() -> None:
    async with FakeSlack(Workspace(scopes=("chat:write",))) as fake:
        web = client(fake)
        posted = await web.chat_postMessage(channel=CHANNEL, text="x")
        with pytest.raises(SlackApiError) as caught:
            await web.reactions_add(channel=CHANNEL, name="eyes", timestamp=posted["ts"])
        assert caught.value.response["error"] == "missing_scope"
        assert caught.value.response["needed"] == "reactions:write"


async def test_users_info_answers_the_people_set_up(fake: FakeSlack) -> None:
    """https://api.slack.com/methods/users.info: the person's tz, tz_label and tz_offset;
    the bot is a bot; an id nobody has is user_not_found; it needs users:read."""
    fake.person(HUMAN, tz="America/Sao_Paulo", tz_label="Brasilia Standard Time",
                tz_offset=-10_800)
    web = client(fake)
    person = (await web.users_info(user=HUMAN, include_locale=True))["user"]
    assert (person["id"], person["tz"], person["tz_label"], person["tz_offset"]) == (
        HUMAN, "America/Sao_Paulo", "Brasilia Standard Time", -10_800)
    assert person["is_bot"] is False and person["locale"] == "en-US"
    bot = (await web.users_info(user=BOT_USER))["user"]
    assert bot["is_bot"] is True and "locale" not in bot
    fake.person("U0TOKYO001", tz="Asia/Tokyo")  # the offset and label from the zone
    assert (await web.users_info(user="U0TOKYO001"))["user"]["tz_offset"] == 32_400
    with pytest.raises(SlackApiError) as caught:
        await web.users_info(user="U0NOBODY01")
    assert caught.value.response["error"] == "user_not_found"
    async with FakeSlack(Workspace(scopes=("chat:write",))) as lacking:
        lacking.person(HUMAN, tz="Asia/Tokyo")
        with pytest.raises(SlackApiError) as caught:
            await client(lacking).users_info(user=HUMAN)
        assert caught.value.response["needed"] == "users:read"
    assert [c["user"] for c in fake.calls("users.info")] == [
        HUMAN, BOT_USER, "U0TOKYO001", "U0NOBODY01"]


async def test_assistant_status_is_recorded_or_unknown(fake: FakeSlack) -> None:
    root = fake.post_as_user(DM, HUMAN, "help me")
    web = client(fake)
    await web.assistant_threads_setStatus(channel_id=DM, thread_ts=root["ts"],
                                          status="is thinking...")
    assert fake.statuses() == [{"channel_id": DM, "thread_ts": root["ts"],
                                "status": "is thinking..."}]
    async with FakeSlack(assistant=False) as old:
        with pytest.raises(SlackApiError) as caught:
            await client(old).assistant_threads_setStatus(channel_id=DM, thread_ts="1.1",
                                                          status="x")
        assert caught.value.response["error"] == "unknown_method"
    with pytest.raises(SlackApiError) as caught:
        await web.api_call("chat.teleport", json={"channel": CHANNEL})
    assert caught.value.response["error"] == "unknown_method"


# -- faults


async def test_a_429_is_retried_by_slack_sdk_after_retry_after(fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=1)
    web = client(fake, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    posted = await web.chat_postMessage(channel=CHANNEL, text="once")
    assert posted["ok"]
    calls = [c for c in fake.requests if c.method == "chat.postMessage"]
    assert len(calls) == 2 and calls[1].at - calls[0].at >= 1.0
    assert [m["text"] for m in fake.messages(CHANNEL)] == ["once"]


async def test_a_429_without_a_retry_handler_reaches_the_caller(fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(SlackApiError) as caught:
        await client(fake, retry_handlers=[]).chat_postMessage(channel=CHANNEL, text="x")
    response = caught.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    assert response.headers["Retry-After"] == "7"
    assert fake.messages(CHANNEL) == []


async def test_a_503_is_retried_by_the_server_error_handler(fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=503)
    web = client(fake, retry_handlers=[AsyncServerErrorRetryHandler(max_retry_count=1)])
    await web.chat_postMessage(channel=CHANNEL, text="x")
    assert len(fake.calls("chat.postMessage")) == 2 and len(fake.messages(CHANNEL)) == 1


async def test_a_dropped_answer_raises_but_the_message_is_stored_once(fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", drop=True)
    web = client(fake, retry_handlers=[])
    meta = {"event_type": "maiden_delivery", "event_payload": {"key": "turn-1"}}
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await web.chat_postMessage(channel=CHANNEL, text="lost answer", metadata=meta)
    assert [m["text"] for m in fake.messages(CHANNEL)] == ["lost answer"]
    # what an outbox does to reconcile: look for its own key in the channel
    history = await web.conversations_history(channel=CHANNEL, include_all_metadata=True)
    assert [m["metadata"] for m in history["messages"]] == [meta]


async def test_slack_sdk_default_handlers_repost_after_a_drop(fake: FakeSlack) -> None:
    """The default AsyncWebClient retries a connection error once: the post lands twice."""
    fake.fail("chat.postMessage", drop=True)
    await client(fake).chat_postMessage(channel=CHANNEL, text="twice")
    assert [m["text"] for m in fake.messages(CHANNEL)] == ["twice", "twice"]


async def test_an_error_fault_answers_ok_false(fake: FakeSlack) -> None:
    fake.fail("chat.update", error="edit_window_closed")
    with pytest.raises(SlackApiError) as caught:
        await client(fake).chat_update(channel=CHANNEL, ts="1.1", text="x")
    assert caught.value.response["error"] == "edit_window_closed"
    assert fake.pending_faults("chat.update") == 0


# -- Socket Mode with slack-sdk's aiohttp client


class Received:
    """A socket mode listener that acks every request and queues it for the test."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[SocketModeRequest] = asyncio.Queue()
        self.frames: list[dict[str, Any]] = []

    async def listener(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        await self.requests.put(req)

    async def message(self, client: AsyncBaseSocketModeClient, message: dict[str, Any],
                      raw: str | None) -> None:
        self.frames.append(message)


@pytest.fixture
async def socket_client(fake: FakeSlack) -> AsyncIterator[tuple[SocketModeClient, Received]]:
    received = Received()
    sm = SocketModeClient(app_token=fake.app_token,
                          web_client=AsyncWebClient(base_url=fake.api_url))
    sm.socket_mode_request_listeners.append(received.listener)
    sm.message_listeners.append(received.message)
    try:
        await sm.connect()  # type: ignore[no-untyped-call]  # slack-sdk: untyped
        await fake.wait_connected()
        yield sm, received
    finally:
        await sm.close()  # type: ignore[no-untyped-call]


async def test_socket_hello_event_and_ack(
        fake: FakeSlack, socket_client: tuple[SocketModeClient, Received]) -> None:
    _, received = socket_client
    payload = fake.user_event(CHANNEL, HUMAN, "<@U0FAKEBOT1> hi", mention=True)
    envelope_id = await fake.socket_event(payload)
    assert await fake.acked(envelope_id) == {"envelope_id": envelope_id}

    request = await received.requests.get()
    assert (request.type, request.envelope_id, request.retry_attempt) == (
        "events_api", envelope_id, 0)
    assert request.payload["event"]["type"] == "app_mention"
    assert request.payload["event"]["ts"] == fake.messages(CHANNEL)[0]["ts"]
    hello = received.frames[0]
    assert hello["type"] == "hello" and hello["connection_info"] == {"app_id": "A0FAKEAPP1"}
    assert fake.calls("apps.connections.open") == [{}]


async def test_socket_redelivery_counts_attempts(
        fake: FakeSlack, socket_client: tuple[SocketModeClient, Received]) -> None:
    _, received = socket_client
    first = await fake.socket_event(message_event(TEAM, DM, HUMAN, "hi", "1733000000.000100",
                                                  channel_type="im"))
    retry = await fake.socket_redeliver(first)
    await fake.acked(retry)
    one, two = await received.requests.get(), await received.requests.get()
    assert (two.retry_attempt, two.retry_reason) == (1, "timeout")
    assert one.payload["event_id"] == two.payload["event_id"]
    assert one.payload["event"]["channel_type"] == "im"


async def test_socket_interactive_block_actions(
        fake: FakeSlack, socket_client: tuple[SocketModeClient, Received]) -> None:
    _, received = socket_client
    posted = await client(fake).chat_postMessage(channel=CHANNEL, text="approve?")
    click = block_actions_payload(HUMAN, CHANNEL, posted["ts"], "approve", "call-7",
                                  message=fake.messages(CHANNEL)[0])
    await fake.acked(await fake.socket_interactive(click))
    request = await received.requests.get()
    assert request.type == "interactive"
    assert request.payload["actions"][0]["value"] == "call-7"
    assert request.payload["container"]["message_ts"] == posted["ts"]


async def test_disconnect_makes_the_client_reconnect(
        fake: FakeSlack, socket_client: tuple[SocketModeClient, Received]) -> None:
    await fake.socket_disconnect()
    await fake.wait_connected(2)
    assert len(fake.calls("apps.connections.open")) == 2
    envelope_id = await fake.socket_event(app_mention_event(TEAM, CHANNEL, HUMAN, "again",
                                                            "1733000000.000100"))
    await fake.acked(envelope_id)


async def test_a_link_closed_by_slack_is_reopened(
        fake: FakeSlack, socket_client: tuple[SocketModeClient, Received]) -> None:
    await fake.socket_close()
    await fake.wait_connected(2)
    await fake.acked(await fake.socket_event(message_event(TEAM, CHANNEL, HUMAN, "back",
                                                           "1733000000.000100")))


async def test_a_used_socket_url_is_refused(fake: FakeSlack) -> None:
    url = (await AsyncWebClient(token=fake.app_token,
                                base_url=fake.api_url).apps_connections_open(
        app_token=fake.app_token))["url"]
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            assert (await ws.receive_json())["type"] == "hello"
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await session.ws_connect(url)


async def test_bolt_over_socket_mode_acks_answers_and_ignores_its_own_posts(
        fake: FakeSlack) -> None:
    app = AsyncApp(client=client(fake))
    seen: asyncio.Queue[str] = asyncio.Queue()

    @app.event("message")
    async def message(event: dict[str, Any], say: AsyncSay) -> None:
        await seen.put(event["text"])
        await say(text=f"echo {event['text']}", thread_ts=event["ts"])

    @app.action("approve")
    async def approve(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        await seen.put(body["actions"][0]["value"])

    handler = AsyncSocketModeHandler(app, fake.app_token)
    try:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt: untyped
        await fake.acked(await fake.socket_event(fake.user_event(DM, HUMAN, "ping",
                                                                 channel_type="im")))
        assert await seen.get() == "ping"
        # Slack delivers the bot's own reply too; bolt drops it (auth.test told it the bot id)
        reply = (await fake.wait_messages(DM, 2))[1]
        assert reply["bot_id"] == BOT
        own = message_event(TEAM, DM, BOT_USER, reply["text"], reply["ts"],
                            thread_ts=reply["thread_ts"], channel_type="im", bot_id=BOT)
        await fake.acked(await fake.socket_event(own))
        click = block_actions_payload(HUMAN, DM, reply["ts"], "approve", "yes")
        await fake.acked(await fake.socket_interactive(click))
        assert await seen.get() == "yes"  # not the bot's own "echo ping"
        assert seen.empty() and len(fake.messages(DM)) == 2
        assert len(fake.calls("auth.test")) == 1
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]


# -- Events API over HTTP: signatures and payloads


def test_signed_events_verify_with_slack_sdk() -> None:
    payload = event_callback(message_event(TEAM, CHANNEL, HUMAN, "hi", "1733000000.000100"))
    body, headers = signed_event(payload, SECRET, retry_num=2)
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    assert (headers["X-Slack-Retry-Num"], headers["X-Slack-Retry-Reason"]) == (
        "2", "http_timeout")
    assert json.loads(body) == payload
    old, old_headers = signed_event(payload, SECRET, ts=1_600_000_000)
    assert not SignatureVerifier(SECRET).is_valid_request(old, old_headers)

    click = block_actions_payload(HUMAN, CHANNEL, "1733000000.000100", "deny", "no")
    form, form_headers = signed_interaction(click, SECRET)
    assert SignatureVerifier(SECRET).is_valid_request(form, form_headers)
    assert json.loads(parse_qs(form.decode())["payload"][0]) == click


def bolt_request(body: bytes, headers: dict[str, str]) -> AsyncBoltRequest:
    """What bolt's HTTP adapters build from Slack's POST."""
    typed: dict[str, str | Sequence[str]] = dict(headers)
    return AsyncBoltRequest(body=body.decode(), headers=typed)


async def test_bolt_accepts_signed_events_and_answers_through_the_fake(
        fake: FakeSlack) -> None:
    app = AsyncApp(client=client(fake), signing_secret=SECRET)

    @app.event("app_mention")
    async def mention(event: dict[str, Any], say: AsyncSay) -> None:
        await say(text="on it", thread_ts=event["ts"])

    body, headers = signed_event(url_verification("abc"), SECRET)
    answer = await app.async_dispatch(bolt_request(body, headers))
    assert (answer.status, json.loads(answer.body)) == (200, {"challenge": "abc"})

    payload = fake.user_event(CHANNEL, HUMAN, "<@U0FAKEBOT1> go", mention=True)
    body, headers = signed_event(payload, SECRET)
    answer = await app.async_dispatch(bolt_request(body, headers))
    assert answer.status == 200
    root, reply = await fake.wait_messages(CHANNEL, 2)
    assert reply["thread_ts"] == root["ts"] and reply["text"] == "on it"

    body, headers = signed_event(payload, "wrong secret")
    answer = await app.async_dispatch(bolt_request(body, headers))
    assert answer.status == 401


async def test_conversations_info_says_whether_a_conversation_is_private(
        fake: FakeSlack) -> None:
    """docs.slack.dev/reference/methods/conversations.info: the conversation object's
    is_private, is_im, is_mpim; the scope of the conversation's kind (channels:read,
    groups:read, im:read, mpim:read); an id that names none is channel_not_found."""
    web = client(fake)
    fake.post_as_user(CHANNEL, HUMAN, "hi")
    public = (await web.conversations_info(channel=CHANNEL))["channel"]
    assert (public["is_private"], public["is_im"], public["is_mpim"], public["is_channel"]) == (
        False, False, False, True)
    fake.conversation("C0SECRET01", "group")  # a private channel with a C id
    secret = (await web.conversations_info(channel="C0SECRET01"))["channel"]
    assert secret["is_private"] is True and secret["is_channel"] is True
    fake.conversation("G0GROUPDM1", "mpim")
    group = (await web.conversations_info(channel="G0GROUPDM1"))["channel"]
    assert group["is_private"] is True and group["is_mpim"] is True
    with pytest.raises(SlackApiError) as caught:
        await web.conversations_info(channel="C0NOWHERE1")
    assert caught.value.response["error"] == "channel_not_found"
    fake.conversation(DM, "im")
    with pytest.raises(SlackApiError) as caught:  # the fake grants no im:read
        await web.conversations_info(channel=DM)
    assert caught.value.response["error"] == "missing_scope"
    assert caught.value.response["needed"] == "im:read"
    async with FakeSlack(Workspace(scopes=("chat:write", "channels:read"))) as lacking:
        lacking.conversation("C0SECRET01", "group")
        with pytest.raises(SlackApiError) as caught:
            await client(lacking).conversations_info(channel="C0SECRET01")
        assert caught.value.response["needed"] == "groups:read"
