"""Answering a Discord interaction: acknowledge first, act only if Discord took it, then say.

Discord takes an interaction's initial response only within 3 seconds of the event and only
once (receiving-and-responding#responding-to-an-interaction: else ``10062 Unknown
interaction``, or ``40060`` for a second one). An interaction that reaches maiden late (one
replayed on a gateway RESUME, or one whose acting took longer than 3 s) would otherwise
take effect while Discord shows the person "This interaction failed", and a person who
then clicks Deny, believing their Approve failed, would have approved. So a click or a
command that acts is acknowledged first (``respond`` with a deferral), acts only once
Discord has answered it with a 2xx, and its outcome is then shown by editing the original
response or by a follow-up, through the interaction's webhook (valid 15 minutes).

Every call goes through the bot's own HTTP client, so it follows ``api_url`` like every
other call (discord.py's interaction helpers answer through a webhook adapter whose base URL
is one per process).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import aiohttp
import discord
from discord.http import Route

from runtime import Failed, retrying, split_message, within

__all__ = ["CHANNEL_MESSAGE", "DEFERRED", "DEFERRED_UPDATE", "EDIT_WAIT_S", "EPHEMERAL",
           "PASSING", "edit_original", "fit", "follow_up", "passing",
           "respond"]

log = logging.getLogger("maiden.discord")

EPHEMERAL = 64
CHANNEL_MESSAGE, DEFERRED, DEFERRED_UPDATE = 4, 5, 6
"""Callback types: CHANNEL_MESSAGE_WITH_SOURCE, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE (the
person sees "thinking…" until the original is edited), DEFERRED_UPDATE_MESSAGE (a click's
message is left as it is until edited)."""

MESSAGE_LIMIT = 2_000
"""Discord refuses content past 2,000 characters (resources/message#create-message), in an
interaction's response too, and the person then hears nothing."""

EDIT_WAIT_S = 14 * 60.0
"""How long an edit or a follow-up is tried again while Discord fails: an interaction's
token lasts 15 minutes."""

PASSING = (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError)
"""Failures that trying again may get past: Discord's 5xx, the network."""


def passing(error: Exception) -> bool:
    """Whether trying again may get past ``error``."""
    return isinstance(error, PASSING)


def fit(text: str) -> str:
    """``text``, or its first part within Discord's limit (cut where ``split_message``
    cuts) and a line saying there was more."""
    if len(text) <= MESSAGE_LIMIT:
        return text
    return split_message(text, MESSAGE_LIMIT - 2)[0] + "\n…"


async def respond(client: discord.Client, interaction: discord.Interaction, kind: int,
                  data: dict[str, Any] | None = None) -> bool:
    """The interaction's initial response; whether Discord took it. A 2xx proves it came
    within the 3 s and was the first, so only then may the interaction act: on False,
    do nothing more (Discord has shown the person that it failed)."""
    route = Route("POST", "/interactions/{interaction_id}/{interaction_token}/callback",
                  interaction_id=interaction.id, interaction_token=interaction.token)
    body: dict[str, Any] = {"type": kind} if data is None else {"type": kind, "data": data}
    try:
        await client.http.request(route, json=body)
    except (discord.DiscordException, *PASSING) as exc:
        # Late (a replay, or a slow store before it) or answered already: whatever it asked
        # is not done, and Discord has told the person it failed.
        log.info("discord: interaction %s was not acknowledged, so nothing was done: %s",
                 interaction.id, exc)
        return False
    return True


async def edit_original(client: discord.Client, interaction: discord.Interaction,
                        data: dict[str, Any]) -> None:
    """Edit the original response (for a click deferred by ``DEFERRED_UPDATE``, the message
    the button is on), trying again while Discord fails (else the person is left looking
    at "thinking…" or a prompt still asking: chaos, seed 8080)."""
    route = Route("PATCH", "/webhooks/{application_id}/{token}/messages/@original",
                  application_id=interaction.application_id, token=interaction.token)
    await _again(client, interaction, route, data)


async def follow_up(client: discord.Client, interaction: discord.Interaction,
                    data: dict[str, Any]) -> None:
    """A new message after the initial response (``flags`` 64: only the clicker sees it),
    tried again while Discord fails."""
    route = Route("POST", "/webhooks/{application_id}/{token}",
                  application_id=interaction.application_id, token=interaction.token)
    await _again(client, interaction, route, data)


async def _again(client: discord.Client, interaction: discord.Interaction, route: Route,
                 data: dict[str, Any]) -> None:
    try:
        await retrying(functools.partial(client.http.request, route, json=data),
                       on=Exception, pause=within(EDIT_WAIT_S, 1.0, 30.0, worth=passing),
                       told=functools.partial(_told, interaction.id))
    except (discord.DiscordException, *PASSING) as exc:
        log.warning("discord: the answer to interaction %s was not shown: %s",
                    interaction.id, exc)


def _told(interaction: int, failed: Failed[Exception], pause: float) -> None:
    log.warning("discord: showing the answer to interaction %s failed (%s); trying again in "
                "%.0f s", interaction, failed.error, pause)
