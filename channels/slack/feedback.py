"""Clicks on the 👍 / 👎 under a reply: recorded through the runtime, once per person per
run (a change of mind replaces the vote); the person hears back in an ephemeral line."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import RunError, Runtime

from ..access import Place
from ..prompts import refusal_text
from .config import SlackConfig
from .render import parse_vote

__all__ = ["FeedbackButtons"]

log = logging.getLogger("maiden.slack")

THANKS = {"up": "Thanks, noted: 👍 this answer helped.",
          "down": "Thanks, noted: 👎 this answer did not help."}


class FeedbackButtons:
    """bolt's handler for the ``maiden_feedback`` action."""

    def __init__(self, runtime: Runtime, config: SlackConfig, client: AsyncWebClient) -> None:
        self.runtime = runtime
        self.config = config
        self.client = client

    async def clicked(self, ack: Callable[[], Awaitable[None]], body: dict[str, Any],
                      action: dict[str, Any]) -> None:
        await ack()
        choice = parse_vote(action)
        # Who clicked is Slack's word (the signed or socket-delivered payload), never the
        # button's: the button names only the run.
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or
                      (body.get("container") or {}).get("channel_id") or "")
        message_ts = str((body.get("container") or {}).get("message_ts") or
                         (body.get("message") or {}).get("ts") or "")
        if choice is None or not user or not channel:
            return
        value, run_id = choice
        if not self.config.access.allows(user, Place.of(channel, direct=channel.startswith("D")),
                                         "talk"):
            await self._tell(channel, user, refusal_text("rate answers"))
            return
        try:
            _, changed = await self.runtime.feedback.vote(
                run_id, value, user=user, channel="slack", place=channel,
                message=message_ts or None)
        except RunError as exc:
            log.info("slack: a vote from %s was refused: %s", user, exc)
            await self._tell(channel, user, f"That did not work: {exc}")
            return
        if changed:
            await self._tell(channel, user, THANKS[value])

    async def _tell(self, channel: str, user: str, text: str) -> None:
        with contextlib.suppress(SlackApiError):
            await self.client.chat_postEphemeral(channel=channel, user=user, text=text)
