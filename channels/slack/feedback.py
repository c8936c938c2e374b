"""Clicks on Slack's feedback buttons under an answer (``channels.feedback``); the person
hears back in an ephemeral line, only when it is news (Slack shows the click itself). A
vote the store could not take is said so ("click again"); if that cannot be said either,
the click is not acknowledged, so that Slack shows the person it failed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import Runtime, StoreError

from ..feedback import UNRECORDED, record_vote
from .config import SlackConfig
from .mapping import read_click
from .render import parse_vote

__all__ = ["FeedbackButtons"]


class FeedbackButtons:
    """bolt's handler for the ``maiden_feedback`` action."""

    def __init__(self, runtime: Runtime, config: SlackConfig, client: AsyncWebClient) -> None:
        self.runtime = runtime
        self.config = config
        self.client = client

    async def clicked(self, ack: Callable[[], Awaitable[None]], body: dict[str, Any],
                      action: dict[str, Any]) -> None:
        await ack()
        vote = parse_vote(action)
        click = read_click(body)
        if vote is None or click is None:
            return
        user, channel = click.user, click.channel
        text, news = await record_vote(self.runtime, self.config.access, vote, click)
        if not news:
            return
        try:
            await self.client.chat_postEphemeral(channel=channel, user=user, text=text)
        except SlackApiError as exc:
            if text == UNRECORDED:  # lost, and nobody knows: not acknowledged after all
                # (bolt answers 500; Slack shows the person the click failed)
                raise StoreError(f"a vote from {user} was not recorded, and saying so "
                                 f"failed: {exc}") from exc

