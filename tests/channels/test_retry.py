"""Reaching a platform that is down: the backoff's table, and trying until it answers."""

from __future__ import annotations

import socket

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from channels import Backoff, ChannelRefused, Unreachable, keep_trying
from channels.retry import reason_of


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
