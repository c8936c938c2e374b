"""Clicks on Slack's feedback buttons under an answer (``channels.feedback``); the person
hears back in an ephemeral line, only when it is news (Slack shows the click itself). A
vote not counted (the store could not take it, its message's id not recorded yet, or
refused) is said so; if that cannot be said either, the click is not acknowledged, so
that Slack shows the person it failed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import DeliveryError, Runtime

from ..feedback import THANKS, record_vote
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
            if text not in THANKS.values():  # not counted (the store could not take it,
                # the message's id not recorded yet, refused), and nobody knows: not
                # acknowledged after all (bolt answers 500; Slack shows the click failed)
                raise DeliveryError(f"a vote from {user} was not counted, and saying so "
                                    f"failed: {exc}") from exc

