"""Slack's ``/maiden`` slash command: the answers of ``channels.commands``, ephemeral to the
one asking, within Slack's 3 seconds (one that takes longer is acknowledged at once and
answered when ready); what changes something for everyone (a stop, a pause) is posted in
the channel, once: a redelivered command finds nothing left to change."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import Failed, retrying, within

from ..access import Place
from ..commands import Answer, Asked, Commands, parse
from ..work import Background
from .config import SlackConfig
from .failures import passing

__all__ = ["ANSWER_WITHIN_S", "COMMAND", "SlashCommand", "place_of"]

log = logging.getLogger("maiden.slack")

COMMAND = "/maiden"
ANSWER_WITHIN_S = 2.0
"""How long an answer may take to go in the acknowledgement itself (Slack waits 3 s)."""
ANSWER_WAIT_S = 14 * 60.0
"""How long a later answer is tried again while Slack fails (as Discord's, whose token
lasts 15 minutes: an answer later than that is no answer to the person who asked)."""


def _told(channel: str, failed: Failed[Exception], pause: float) -> None:
    log.warning("slack: answering /maiden in %s failed (%s); trying again in %.0f s", channel,
                failed.error, pause)


def place_of(channel: str, name: str) -> Place:
    """Where a command was typed. Slack names a DM's channel ``directmessage``, a private
    channel ``privategroup`` and a group DM ``mpdm-…`` (api.slack.com/interactivity/
    slash-commands); a DM's id starts with ``D``, a legacy private channel's with ``G``."""
    direct = channel.startswith("D") or name == "directmessage"
    private = direct or channel.startswith("G") or name == "privategroup" \
        or name.startswith("mpdm-")
    return Place.of(channel, direct=direct, private=private)


class SlashCommand:
    """Answers ``/maiden`` for one Slack channel adapter."""

    def __init__(self, commands: Commands, config: SlackConfig, client: AsyncWebClient,
                 background: Background) -> None:
        self.commands = commands
        self.config = config
        self.client = client
        self.background = background

    async def handle(self, ack: Callable[..., Awaitable[None]], command: dict[str, Any]
                     ) -> None:
        channel, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
        place = place_of(channel, str(command.get("channel_name") or ""))
        asked = Asked(words=parse(str(command.get("text") or "")), user=user, channel="slack",
                      place=channel, request=f"slack:{command.get('team_id')}:"
                                             f"{command.get('trigger_id')}",
                      where=place, thread_id=f"slack:{command.get('team_id')}:{channel}")
        may = functools.partial(self.config.access.allows, user, place)
        answer, answering = await self.commands.answer_within(asked, may, ANSWER_WITHIN_S)
        if answer is not None:
            await ack(text=answer.text, response_type="ephemeral")
            await self._announce(channel, answer)
            return
        await ack(text="⏳ On it…", response_type="ephemeral")
        self.background.spawn(self._later(answering, channel, user))

    async def _later(self, answering: asyncio.Future[Answer], channel: str, user: str) -> None:
        """The answer of a command acknowledged "on it": tried again while Slack fails, for
        as long as an answer is worth showing (else the person is left with "On it…" and
        nothing after: chaos, seed 9292)."""
        answer = await answering
        try:
            await retrying(functools.partial(self.client.chat_postEphemeral, channel=channel,
                                             user=user, text=answer.text),
                           on=Exception, pause=within(ANSWER_WAIT_S, 1.0, 30.0, worth=passing),
                           told=functools.partial(_told, channel))
        except (SlackApiError, SlackClientError, aiohttp.ClientError, OSError,
                TimeoutError) as exc:
            log.warning("slack: could not answer /maiden in %s: %s", channel, exc)
        await self._announce(channel, answer)

    async def _announce(self, channel: str, answer: Answer) -> None:
        if answer.announce is None:
            return
        try:
            await self.client.chat_postMessage(channel=channel, text=answer.announce)
        except SlackApiError as exc:
            log.warning("slack: could not post in %s: %s", channel, exc)
