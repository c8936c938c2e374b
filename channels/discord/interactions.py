"""Discord interactions: ``/maiden`` (``commands``), and the buttons under a message.

Approval buttons carry the run, the call and the arguments' hash in their ``custom_id``
and are answered from ``on_interaction``, so buttons posted before a restart work after
it; a click counts only on that run's own prompt (``channels.clicks``). A click is
acknowledged before it acts (``acks``): an approval with ``DEFERRED_UPDATE``, then decided,
then its prompt edited to say who decided (a refusal is an ephemeral follow-up); a vote
with an ephemeral "thinking", then recorded, then the thanks edited in. A click Discord no
longer takes (past its 3 s, a RESUME's replay) changes nothing. The 👍 / 👎 under an answer
carry its run the same way (``channels.feedback``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import discord

from runtime import MaidenError, RunError, Runtime

from ..access import Place
from ..clicks import Click, bind
from ..feedback import record_vote
from ..prompts import refusal_text
from .acks import (
    CHANNEL_MESSAGE,
    DEFERRED,
    DEFERRED_UPDATE,
    EPHEMERAL,
    edit_original,
    follow_up,
    respond,
)
from .commands import GROUP, SlashCommands
from .config import DiscordConfig
from .privacy import is_private
from .render import Choice, parse_custom_id, parse_vote_id

__all__ = ["Interactions", "link_of"]


class Interactions:
    """Commands and clicks, for one channel named ``via``."""

    def __init__(self, runtime: Runtime, config: DiscordConfig, client: discord.Client,
                 slash: SlashCommands, *, via: str) -> None:
        self._runtime = runtime
        self._config = config
        self._client = client
        self._slash = slash
        self._via = via

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        data: Any = interaction.data or {}
        if interaction.type in (discord.InteractionType.application_command,
                                discord.InteractionType.autocomplete):
            if data.get("name") == GROUP:
                await self._slash.handle(interaction, _place(interaction))
            return
        if interaction.type is not discord.InteractionType.component:
            return
        custom_id = str(data.get("custom_id", ""))
        choice = parse_custom_id(custom_id)
        vote = parse_vote_id(custom_id)
        if choice is None and vote is None:
            return
        if interaction.message is None:
            return  # a button is always on a message
        click = Click(via=self._via, user=str(interaction.user.id),
                      channel=str(interaction.channel_id or ""),
                      message=str(interaction.message.id), place=_place(interaction))
        if vote is not None:
            if await respond(self._client, interaction, DEFERRED, {"flags": EPHEMERAL}):
                text, _ = await record_vote(self._runtime, self._config.access, vote, click)
                await edit_original(self._client, interaction, {"content": text})
            return
        assert choice is not None
        await self._decide(interaction, click, choice)

    async def _decide(self, interaction: discord.Interaction, click: Click,
                      choice: Choice) -> None:
        # Only the run's own prompt decides, by the rules at the run's place; the runtime
        # then checks ``approvers`` (or [agent] approvers) again.
        bound = await bind(self._runtime, self._config.access, click, choice.run_id,
                           right="approve", call=choice.call_id or None)
        if isinstance(bound, str):  # decides nothing, so said at once
            await respond(self._client, interaction, CHANNEL_MESSAGE,
                          {"content": bound, "flags": EPHEMERAL})
            return
        if not await respond(self._client, interaction, DEFERRED_UPDATE):
            return  # late or answered already: Discord showed the person it failed
        run = bound.run
        try:
            pending = run.pending_approval
            if pending is None or not pending.arguments_hash.startswith(choice.hash_prefix) \
                    or (choice.call_id and choice.call_id != pending.tool_call_id):
                raise RunError("stale_approval", "this prompt is no longer current")
            await self._runtime.decide(run.id, pending.tool_call_id, approve=choice.approve,
                                       by=click.user, arguments_hash=pending.arguments_hash,
                                       approvers=self._config.approvers or None)
        except MaidenError as exc:
            reason = getattr(exc, "reason", "")
            text = refusal_text("decide approvals") if reason == "not_an_approver" \
                else f"That did not work: {exc}"
            await follow_up(self._client, interaction, {"content": text, "flags": EPHEMERAL})
            return
        verb = "Approved" if choice.approve else "Denied"
        await edit_original(self._client, interaction, {
            "content": f"{verb} by <@{click.user}>: `{pending.name}`", "components": []})


def link_of(client: discord.Client) -> Callable[[str, str], str | None]:
    """A message's link: ``https://discord.com/channels/{guild or @me}/{channel}/{id}``."""
    def link(channel: str, message: str) -> str | None:
        found = client.get_channel(int(channel)) if channel.isdigit() else None
        guild = getattr(getattr(found, "guild", None), "id", None)
        return f"https://discord.com/channels/{guild or '@me'}/{channel}/{message}" \
            if channel and message else None
    return link


def _place(interaction: discord.Interaction) -> Place:
    channel = str(interaction.channel_id or "")
    guild = str(interaction.guild_id) if interaction.guild_id else None
    parent = getattr(interaction.channel, "parent_id", None)
    return Place.of(channel, str(parent) if parent is not None else None, guild,
                    direct=guild is None,
                    private=guild is None or is_private(interaction.channel))
