"""The fake Slack's side of HTTP mode (``tests/fakes/slack/request_url.py``): signed requests
that slack-sdk's own verifier accepts, and Slack's judgement of the answers — a 2xx within
the time allowed acknowledges, a late answer is a timeout Slack does not wait for, another
status or no connection is retried with its reason unless ``X-Slack-No-Retry``; commands'
answers read as Slack shows them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import pytest
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from tests.fakes.site import free_port, loopback_runner, serve_on_loopback
from tests.fakes.slack import TEAM, FakeSlack, command_message, slash_command

pytestmark = pytest.mark.timeout(20)


class App:
    """An app's Request URL that answers as told and records what it was sent."""

    def __init__(self, secret: str) -> None:
        self.verifier = SignatureVerifier(secret)
        self.seen: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[web.Response] = []
        self.delay_s = 0.0
        self.done = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = dict(request.headers)
        self.seen.append((headers, body))
        if not self.verifier.is_valid_request(body, headers):
            return web.Response(status=401)
        await asyncio.sleep(self.delay_s)
        self.done.set()
        return self.answers.pop(0) if self.answers else web.Response(status=200)


@pytest.fixture
async def app_and_fake() -> AsyncIterator[tuple[App, FakeSlack, str]]:
    async with FakeSlack() as fake:
        fake.request_url.within_s = 0.5  # Slack's three seconds, shortened
        app = App(fake.signing_secret)
        server = web.Application()
        server.router.add_post("/slack/events", app.handle)
        runner = loopback_runner(server)
        await runner.setup()
        port = await serve_on_loopback(runner)
        try:
            yield app, fake, f"http://127.0.0.1:{port}/slack/events"
        finally:
            await runner.cleanup()


async def test_an_event_is_signed_and_a_2xx_in_time_acknowledges_it(
        app_and_fake: tuple[App, FakeSlack, str]) -> None:
    app, fake, url = app_and_fake
    event = fake.user_event("C0GENERAL1", "U1", "hello")
    sent = await fake.request_url.event(url, event)
    assert sent.acked and sent.retry is None
    headers, body = app.seen[0]
    assert json.loads(body) == event and "X-Slack-Retry-Num" not in headers
    again = await fake.request_url.event(url, event, retry_num=1, retry_reason="http_error")
    assert again.acked
    assert (app.seen[1][0]["X-Slack-Retry-Num"], app.seen[1][0]["X-Slack-Retry-Reason"]) == (
        "1", "http_error")
    with pytest.raises(ValueError, match="at most 3 times"):
        await fake.request_url.event(url, event, retry_num=4)


async def test_a_late_answer_is_a_timeout_slack_does_not_wait_for(
        app_and_fake: tuple[App, FakeSlack, str]) -> None:
    app, fake, url = app_and_fake
    app.delay_s = 1.0
    sent = await fake.request_url.event(url, fake.user_event("C0GENERAL1", "U1", "slow"))
    assert (sent.acked, sent.retry, sent.late_status) == (False, "http_timeout", None)
    await asyncio.wait_for(app.done.wait(), 5)  # the first request went on meanwhile
    await asyncio.sleep(0.2)
    assert sent.late_status == 200


@pytest.mark.parametrize(("answer", "retry"), [
    (web.Response(status=500), "http_error"),
    (web.Response(status=503, headers={"X-Slack-No-Retry": "1"}), None),
])
async def test_another_status_is_retried_unless_the_app_says_not_to(
        app_and_fake: tuple[App, FakeSlack, str], answer: web.Response, retry: str | None
) -> None:
    app, fake, url = app_and_fake
    app.answers.append(answer)
    sent = await fake.request_url.event(url, fake.user_event("C0GENERAL1", "U1", "x"))
    assert (sent.acked, sent.retry) == (False, retry)


async def test_an_app_out_of_reach_is_a_failed_connection() -> None:
    async with FakeSlack() as fake:
        url = f"http://127.0.0.1:{free_port()}/slack/events"
        sent = await fake.request_url.event(url, fake.user_event("C0GENERAL1", "U1", "x"))
        assert (sent.status, sent.retry) == (None, "connection_failed")
        click = await fake.request_url.interaction(url, {"type": "block_actions"})
        assert (click.acked, click.retry) == (False, None)  # a click is not retried


async def test_a_commands_answer_reads_as_slack_shows_it(
        app_and_fake: tuple[App, FakeSlack, str]) -> None:
    app, fake, url = app_and_fake
    app.answers += [
        web.json_response({"text": "Nothing is running here.", "response_type": "ephemeral"}),
        web.Response(status=200, text="plain words"),
        web.Response(status=200),
        web.json_response({"response_type": "everyone", "text": "x"}),
    ]
    payload = slash_command(TEAM, "C0GENERAL1", "U1", "status")
    answer = await fake.request_url.command(url, payload)
    assert command_message(answer) == {"text": "Nothing is running here.",
                                       "response_type": "ephemeral"}
    fields: dict[str, Any] = {k: v[0] for k, v in parse_qs(app.seen[0][1].decode()).items()}
    assert fields["command"] == "/maiden" and fields["text"] == "status"
    assert command_message(await fake.request_url.command(url, payload)) == {
        "text": "plain words", "response_type": "ephemeral"}
    assert command_message(await fake.request_url.command(url, payload)) is None
    with pytest.raises(ValueError, match="ephemeral or in_channel"):
        command_message(await fake.request_url.command(url, payload))


async def test_nothing_leaves_while_slack_is_down(
        app_and_fake: tuple[App, FakeSlack, str]) -> None:
    _, fake, url = app_and_fake
    began = time.monotonic()
    await fake.misbehave("down", 0.4)
    sent = await fake.request_url.event(url, fake.user_event("C0GENERAL1", "U1", "x"))
    assert sent.acked and sent.sent_at - began >= 0.35  # it left once Slack was back


async def test_the_stop_button_shows_only_while_the_session_is_processing() -> None:
    async with FakeSlack() as fake:
        root = fake.post_as_user("C0GENERAL1", "U1", "hi")["ts"]
        assert fake.stop_button("C0GENERAL1", root, "U1") is None  # no session
        fake.api.sessions.set_status({"channel_id": "C0GENERAL1", "thread_ts": root,
                                      "status": "processing"})
        stopped = fake.stop_button("C0GENERAL1", root, "U1")
        assert stopped is not None and stopped["event"]["type"] == "agent_session_stopped"
        fake.api.sessions.set_status({"channel_id": "C0GENERAL1", "thread_ts": root,
                                      "status": "suspended"})
        assert fake.stop_button("C0GENERAL1", root, "U1") is None
