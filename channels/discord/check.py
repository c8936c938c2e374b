"""`maiden check` for Discord: the token works against ``api_url``, the message-content intent
is on, the invite URL with the permissions the bot needs, and whether ``/maiden`` is
registered in the allowed guilds."""

from __future__ import annotations

import asyncio
from typing import Any

import discord
from discord.http import HTTPClient, Route

from .acks import PASSING
from .channel import point_at
from .config import DiscordConfig

__all__ = ["PERMISSIONS", "check_discord", "invite_url"]

PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 16) | (1 << 38)
"""View channels, send messages, read message history, send messages in threads."""

_CONTENT_INTENT = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT, ..._LIMITED


def invite_url(application_id: str) -> str:
    # applications.commands: the bot may register /maiden in the guilds it joins.
    return (f"https://discord.com/oauth2/authorize?client_id={application_id}"
            f"&scope=bot+applications.commands&permissions={PERMISSIONS}")


async def check_discord(config: DiscordConfig, token: str) -> tuple[bool, list[str]]:
    """(ok, lines to print)."""
    http = HTTPClient(asyncio.get_running_loop())
    point_at(http, config.api_url)
    try:
        try:
            me: Any = await http.static_login(token)
        except discord.LoginFailure as exc:
            return False, [f"bot token refused by {config.api_url}: {exc}"]
        except (discord.DiscordException, *PASSING) as exc:
            return False, [f"cannot reach {config.api_url}: {exc}"]
        app: Any = await http.request(Route("GET", "/applications/@me"))
        lines = [f"bot {me['username']} ({me['id']})",
                 f"invite: {invite_url(str(app.get('id') or me['id']))}"]
        lines += await _commands(http, str(app.get("id") or me["id"]), config.allow_guilds)
        if not int(app.get("flags") or 0) & _CONTENT_INTENT:
            lines.append("the message-content intent is off: the bot cannot read messages "
                         "(developer portal → Bot → Privileged Gateway Intents → Message "
                         "Content Intent)")
            return False, lines
        return True, lines
    finally:
        await http.close()


async def _commands(http: HTTPClient, application_id: str, guilds: list[str]) -> list[str]:
    """Where ``/maiden`` is registered (``maiden run`` registers it at start)."""
    lines = []
    for guild in guilds:
        try:
            found: Any = await http.request(Route(
                "GET", "/applications/{application_id}/guilds/{guild_id}/commands",
                application_id=application_id, guild_id=guild))
        except discord.DiscordException as exc:
            lines.append(f"/maiden in guild {guild}: cannot tell ({exc}); invite the bot "
                         "with the applications.commands scope")
            continue
        there = any(c.get("name") == "maiden" for c in found or [])
        lines.append(f"/maiden in guild {guild}: " + (
            "registered" if there else "not registered yet (`maiden run` registers it)"))
    return lines
