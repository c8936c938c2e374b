"""Reaching a platform that is down: the backoff's table, trying until it answers, and
the link a channel and its deliverer share."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from channels import Backoff, ChannelRefused, Link, Unreachable, keep_trying
from channels.retry import Reach, reason_of
from runtime import EchoProvider, Runtime, SQLiteStore


@pytest.mark.parametrize(("attempt", "jitter", "delay"), [
    (0, 0.0, 0.5), (0, 1.0, 1.0),          # half fixed, half random
    (1, 0.0, 1.0), (3, 1.0, 8.0),          # doubling
    (6, 0.0, 30.0), (6, 1.0, 60.0),        # capped at max_s
    (10_000, 0.5, 45.0),                   # no overflow, however long it is down
])
def test_the_delay_doubles_with_jitter_up_to_the_cap(attempt: int, jitter: float,
                                                     delay: float) -> None:
    assert Backoff(base_s=1.0, max_s=60.0, random=lambda: jitter).delay(attempt) == delay


async def test_keep_trying_waits_between_attempts_until_one_connects() -> None:
    slept: list[float] = []
    told: list[tuple[str, float]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    answers: list[Exception | None] = [Unreachable("refused"), Unreachable("dns"), None]

    async def attempt() -> str:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return "connected"

    backoff = Backoff(base_s=1.0, max_s=3.0, sleep=sleep, random=lambda: 1.0)
    got = await keep_trying(attempt, backoff, lambda r, d: told.append((r, d)),
                            first=Unreachable("down at start"))
    assert got == "connected" and not answers
    assert told == [("down at start", 1.0), ("refused", 2.0), ("dns", 3.0)]
    assert slept == [1.0, 2.0, 3.0]


async def test_a_refusal_ends_the_trying() -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError("a refusal is not waited out")

    async def attempt() -> None:
        raise ChannelRefused("Slack refused $SLACK_BOT_TOKEN: invalid_auth")

    with pytest.raises(ChannelRefused, match="invalid_auth"):
        await keep_trying(attempt, Backoff(sleep=sleep), lambda r, d: None)


@pytest.mark.parametrize(("error", "reason"), [
    (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)"), "connection refused"),
    (socket.gaierror(-2, "Name or service not known"),
     "name not resolved (Name or service not known)"),
    (TimeoutError(), "timed out"),
    (OSError(113, "No route to host"), "No route to host"),
    (RuntimeError("odd"), "RuntimeError: odd"),
])
def test_a_connection_failure_in_a_few_words(error: BaseException, reason: str) -> None:
    assert reason_of(error) == reason
    # as aiohttp wraps it: the OS's reason, not aiohttp's text with the host again
    if isinstance(error, OSError):
        key = ConnectionKey("slack.com", 443, True, True, None, None, None)
        assert reason_of(aiohttp.ClientConnectorError(key, error)) == reason


async def test_a_deliverer_made_before_its_channel_asks_its_link_whether_it_is_up(
        tmp_path: Path) -> None:
    """Made before the runtime, a deliverer is not connected until its channel says so
    (``Reach``, on the link they share): its readiness is asked of it, never set on it."""
    from slack_sdk.web.async_client import AsyncWebClient

    from channels.slack.deliverer import SlackDeliverer

    link = Link()
    deliverer = SlackDeliverer(AsyncWebClient(token="xoxb-test"), link=link)
    assert deliverer.offline == "not connected yet" and deliverer.bot_user is None
    async with SQLiteStore(tmp_path / "m.db") as store:
        reach = Reach("slack", Runtime(store, EchoProvider()), link, max_s=1.0,
                      log=logging.getLogger("maiden.test"))
        reach.down("connection refused")
        assert deliverer.offline == "not connected yet (connection refused)"
        link.signed_in_as("U0BOT")
        reach.up()
    assert deliverer.offline is None and deliverer.bot_user == "U0BOT"
    with pytest.raises(AttributeError):
        deliverer.offline = "set from outside"
