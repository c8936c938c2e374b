"""What the fake Slack's own tests share: the real client pointed at a fake."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

__all__ = ["web"]


def web(fake: FakeSlack) -> AsyncWebClient:
    """slack_sdk's client with the fake's bot token, at the fake's Web API."""
    return AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
