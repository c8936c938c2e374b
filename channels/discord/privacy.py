"""Whether a Discord place is private: what is learned there is recalled only there.

Discord has no "private channel" flag. A guild channel is private when ``@everyone`` (the
role whose id is the guild's) cannot view it: its permissions for that role, the guild's
base permissions with the channel's overwrites applied (discord.dev, Topics → Permissions,
"Permission Overwrites"; Resources → Channel, ``permission_overwrites``), lack
``VIEW_CHANNEL``. A private thread (type 12) is private whatever its parent; a public
thread is as private as its parent channel. A DM is private too. Where discord.py does not
hold the channel (a partial one, a thread whose parent is not cached), the place is taken
as private: failing closed. discord.py keeps the guild's channels current (CHANNEL_UPDATE),
so a channel made private is private from its next message on.
"""

from __future__ import annotations

from typing import Any

import discord

__all__ = ["is_private"]


def is_private(channel: Any) -> bool:
    """Whether ``channel`` (a message's or an interaction's) is private."""
    if isinstance(channel, discord.Thread):
        if channel.type is discord.ChannelType.private_thread:
            return True
        parent = channel.parent
        if parent is None:
            return True
        channel = parent
    if not isinstance(channel, discord.abc.GuildChannel):
        return True  # a DM, a group DM, or a channel discord.py does not hold
    # An interaction's channel may be built from the partial one its payload carries,
    # without overwrites: only the guild's own copy (from GUILD_CREATE, kept up to date by
    # CHANNEL_UPDATE) says who may view it.
    held = channel.guild.get_channel(channel.id)
    if held is None:
        return True
    return not held.permissions_for(channel.guild.default_role).view_channel
