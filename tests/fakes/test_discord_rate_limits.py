"""429s as https://discord.com/developers/docs/topics/rate-limits documents them: a JSON body
with ``message``, ``retry_after`` (seconds, a float) and ``global``; ``Retry-After`` and the
``X-RateLimit-*`` headers by scope; discord.py waiting ``retry_after`` out and sending once;
interaction routes outside the global limit."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest
from discord.http import Route

from tests.fakes.discord import GENERAL_ID, FakeDiscord
from tests.fakes.test_discord_contract import client

pytestmark = pytest.mark.timeout(30)

SEND = "POST /channels/{channel_id}/messages"


@pytest.mark.parametrize(("scope", "said"), [("user", "You are being rate limited."),
                                             ("shared", "The resource is being rate limited."),
                                             ("global", "You are being rate limited.")])
async def test_a_429_carries_retry_after_global_and_the_headers(scope: Any, said: str) -> None:
    async with FakeDiscord() as fake, aiohttp.ClientSession() as session:
        fake.fail(SEND, status=429, retry_after=1.25, scope=scope)
        async with session.post(f"{fake.api_url}/channels/{GENERAL_ID}/messages",
                                json={"content": "hi"},
                                headers={"Authorization": f"Bot {fake.token}"}) as response:
            body, headers = await response.json(), response.headers
    assert response.status == 429
    assert body == {"message": said, "retry_after": 1.25, "global": scope == "global"}
    assert headers["Retry-After"] == "2" and headers["X-RateLimit-Scope"] == scope
    assert headers.get("X-RateLimit-Global") == ("true" if scope == "global" else None)
    if scope == "global":  # the global limit is no route's bucket
        assert "X-RateLimit-Bucket" not in headers
    else:
        assert headers["X-RateLimit-Reset-After"] == "1.250"
        assert headers["X-RateLimit-Remaining"] == ("0" if scope == "user" else "4")


@pytest.mark.parametrize("scope", ["user", "global"])
async def test_discord_py_waits_out_retry_after_and_sends_once(scope: Any) -> None:
    async with client() as (fake, http):
        fake.fail(SEND, status=429, retry_after=0.3, scope=scope)
        started = time.monotonic()
        await http.request(Route("POST", "/channels/{channel_id}/messages",
                                 channel_id=GENERAL_ID), json={"content": "after"})
        waited = time.monotonic() - started
    assert waited >= 0.28
    assert [c.status for c in fake.calls(SEND)] == [429, 200]
    assert [m["content"] for m in fake.messages(GENERAL_ID)] == ["after"]


async def test_interaction_routes_are_not_bound_by_the_global_limit() -> None:
    async with FakeDiscord() as fake:
        with pytest.raises(ValueError, match="global rate limit"):
            fake.fail("POST /interactions/{id}/{token}/callback", status=429, scope="global")
