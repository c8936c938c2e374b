"""The REST API's routes, each a method over the world and the store.

Routes are Discord's own templates (``/channels/{channel_id}/messages``); ``routes.py`` matches
a request to one, checks the bot token where Discord wants it, plays queued faults, and calls
the handler with a ``Request``. Handlers answer ``(status, body)`` — ``None`` for 204 — or raise
``DiscordError``. What Discord checks is checked here too: empty and over-long messages,
unknown channels, messages and interactions, editing someone else's message, answering an
interaction twice, malformed components.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from . import interactions
from . import payloads as p
from .interactions import Interactions
from .payloads import JSON
from .store import DiscordError, Store, form_error, parse_int, unknown
from .world import World

Answer = tuple[int, Any]
Echo = Callable[[str, JSON], Awaitable[None]]

_MENTION = re.compile(r"<@!?(\d{15,21})>")
# SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS, IS_VOICE_MESSAGE, IS_COMPONENTS_V2: what a bot may
# set on a message it creates (EPHEMERAL only in an interaction response)
_SEND_FLAGS = (1 << 2) | (1 << 12) | (1 << 13) | (1 << 15)


@dataclass
class Request:
    """A parsed REST request; ``params`` are the route template's fields."""

    method: str
    params: dict[str, str]
    query: dict[str, str]
    body: JSON | None = None
    files: list[JSON] = field(default_factory=list)
    gateway: str = ""
    """The gateway URL to hand out (``wss://gateway.discord.gg`` over TLS, loopback otherwise)."""


Handler = Callable[[Request], Awaitable[Answer]]


class RestAPI:
    """Every route the fake serves; ``table()`` lists them with whether a bot token is needed."""

    def __init__(self, world: World, store: Store, echo: Echo, *,
                 interaction_deadline: float = 3.0) -> None:
        self.world = world
        self.store = store
        self.echo = echo
        """Called with each MESSAGE_CREATE/UPDATE/DELETE the bot caused (Discord echoes them)."""
        self.typing: dict[str, list[float]] = {}
        self.uploaded: dict[str, bytes] = {}
        self.commands: dict[str, list[JSON]] = {}
        """The application commands registered, by guild id (``global`` for global ones)."""
        """The bytes of every file the bot attached, by attachment id."""
        self.interactions = Interactions(self, deadline=interaction_deadline)

    def table(self) -> list[tuple[str, str, Handler, bool]]:
        it = self.interactions
        return [
            ("GET", "/users/@me", self.me, True),
            ("GET", "/users/{user_id}", self.get_user, True),
            ("POST", "/users/@me/channels", self.open_dm, True),
            ("GET", "/gateway", self.gateway, False),
            ("GET", "/gateway/bot", self.gateway_bot, True),
            ("GET", "/oauth2/applications/@me", self.application, True),
            ("GET", "/applications/@me", self.application, True),
            ("GET", "/channels/{channel_id}", self.get_channel, True),
            ("POST", "/channels/{channel_id}/typing", self.send_typing, True),
            ("GET", "/channels/{channel_id}/messages", self.history, True),
            ("POST", "/channels/{channel_id}/messages", self.send, True),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self.get_message, True),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self.edit, True),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self.delete, True),
            ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
             self.react, True),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
             self.unreact, True),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands",
             self.put_commands, True),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands",
             self.get_commands, True),
            ("PUT", "/applications/{application_id}/commands", self.put_commands, True),
            ("GET", "/applications/{application_id}/commands", self.get_commands, True),
            ("POST", "/interactions/{interaction_id}/{token}/callback", it.callback, False),
            ("POST", "/webhooks/{application_id}/{token}", it.follow_up, False),
            ("GET", "/webhooks/{application_id}/{token}/messages/{message_id}", it.get, False),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", it.edit, False),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/{message_id}", it.delete,
             False),
        ]

    # -- application commands

    async def put_commands(self, req: Request) -> Answer:
        """Bulk overwrite: the application's commands in a guild (or global) become these."""
        where = str(req.params.get("guild_id") or "global")
        if where != "global" and where not in self.world.guild_ids:
            raise DiscordError(404, 10004, "Unknown Guild")
        if not isinstance(req.body, list) or len(req.body) > 100:
            raise form_error("_root", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
        made = [dict(c, id=str(p.new_id()), application_id=str(self.world.app_id), version="1",
                     type=c.get("type", 1), **({} if where == "global" else {"guild_id": where}))
                for c in req.body]
        self.commands[where] = made
        return 200, made

    async def get_commands(self, req: Request) -> Answer:
        return 200, self.commands.get(str(req.params.get("guild_id") or "global"), [])

    # -- identity and the gateway

    async def me(self, req: Request) -> Answer:
        bot = self.world.user(self.world.bot_id)
        return 200, dict(bot, verified=True, mfa_enabled=False, email=None, locale="en-US",
                         bio="", premium_type=0)

    async def get_user(self, req: Request) -> Answer:
        user = self.world.users.get(req.params["user_id"])
        if user is None:
            raise unknown("User")
        return 200, user

    async def gateway(self, req: Request) -> Answer:
        return 200, {"url": req.gateway}

    async def gateway_bot(self, req: Request) -> Answer:
        return 200, {"url": req.gateway, "shards": 1, "session_start_limit": {
            "total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}}

    async def application(self, req: Request) -> Answer:
        return 200, self.world.application()

    # -- channels

    def channel(self, channel_id: str) -> JSON:
        found = self.world.channels.get(channel_id)
        if found is None:
            raise unknown("Channel")
        return found

    async def get_channel(self, req: Request) -> Answer:
        return 200, self.channel(req.params["channel_id"])

    async def open_dm(self, req: Request) -> Answer:
        recipient = str((req.body or {}).get("recipient_id", ""))
        if recipient not in self.world.users:
            raise form_error("recipient_id", "USER_NOT_FOUND", "Unknown user")
        return 200, self.world.dm_with(recipient) or self.world.add_dm(p.new_id(), recipient)

    async def send_typing(self, req: Request) -> Answer:
        self.channel(req.params["channel_id"])
        self.typing.setdefault(req.params["channel_id"], []).append(time.monotonic())
        return 204, None

    # -- messages

    async def history(self, req: Request) -> Answer:
        channel_id = self.channel(req.params["channel_id"])["id"]
        q = req.query
        limit = parse_int(q.get("limit", "50"), "limit")
        found = self.store.history(channel_id, limit=limit, before=q.get("before"),
                                   after=q.get("after"), around=q.get("around"))
        # Discord gives a message's nonce back only when it is created, never in history.
        return 200, [{k: v for k, v in m.items() if k != "nonce"} for m in found]

    async def get_message(self, req: Request) -> Answer:
        return 200, self.store.get(self.channel(req.params["channel_id"])["id"],
                                   req.params["message_id"])

    async def send(self, req: Request) -> Answer:
        channel_id = self.channel(req.params["channel_id"])["id"]
        body = req.body or {}
        if body.get("flags", 0) & ~_SEND_FLAGS:
            raise form_error("flags", "MESSAGE_FLAGS_INVALID", "Invalid message flags.")
        msg = self.bot_message(channel_id, body, req.files)
        stored, created = self.store.create(msg, enforce_nonce=bool(body.get("enforce_nonce")))
        if created:
            await self.posted(stored)
        return 200, stored

    async def posted(self, msg: JSON) -> None:
        """Note a new message on its channel and echo it on the gateway."""
        channel = self.world.channels.get(msg["channel_id"])
        if channel is not None:
            channel["last_message_id"] = msg["id"]
            if channel["type"] == p.PUBLIC_THREAD:
                channel["message_count"] += 1
                channel["total_message_sent"] += 1
        await self.echo("MESSAGE_CREATE", self.for_gateway(msg))

    async def edit(self, req: Request) -> Answer:
        channel_id = self.channel(req.params["channel_id"])["id"]
        edited = self.edit_message(channel_id, req.params["message_id"], req.body or {})
        await self.echo("MESSAGE_UPDATE", self.for_gateway(edited))
        return 200, edited

    def edit_message(self, channel_id: str, message_id: str, body: JSON, *,
                     ephemeral: bool = False) -> JSON:
        fields = self.message_fields(body, partial=True, channel_id=channel_id)
        after = dict(self.store.get(channel_id, message_id, ephemeral=ephemeral), **fields)
        if not (after["content"] or after["embeds"] or after["components"]
                or after["attachments"]):
            raise DiscordError(400, 50006, "Cannot send an empty message")
        return self.store.edit(channel_id, message_id, fields, editor=self.world.bot_id,
                               ephemeral=ephemeral)

    async def delete(self, req: Request) -> Answer:
        channel_id = self.channel(req.params["channel_id"])["id"]
        self.store.delete(channel_id, req.params["message_id"])
        await self.deleted(channel_id, req.params["message_id"])
        return 204, None

    async def deleted(self, channel_id: str, message_id: str) -> None:
        gone: JSON = {"id": message_id, "channel_id": channel_id}
        guild_id = self.world.guild_of(channel_id)
        if guild_id is not None:
            gone["guild_id"] = guild_id
        await self.echo("MESSAGE_DELETE", gone)

    async def react(self, req: Request) -> Answer:
        self._reaction(req, add=True)
        return 204, None

    async def unreact(self, req: Request) -> Answer:
        self._reaction(req, add=False)
        return 204, None

    def _reaction(self, req: Request, *, add: bool) -> None:
        msg = self.store.find(self.channel(req.params["channel_id"])["id"],
                              req.params["message_id"], ephemeral=False)
        if msg is None:
            raise unknown("Message")
        name = req.params["emoji"]
        reactions: list[JSON] = msg.setdefault("reactions", [])
        mine = [r for r in reactions if r["emoji"]["name"] == name and r["me"]]
        if add and not mine:
            reactions.append({"emoji": {"id": None, "name": name}, "count": 1, "me": True,
                              "me_burst": False, "burst_me": False, "burst_count": 0,
                              "burst_colors": [], "count_details": {"burst": 0, "normal": 1}})
        if not add:
            for r in mine:
                reactions.remove(r)
            if not reactions:
                del msg["reactions"]

    # -- building the bot's messages

    def bot_message(self, channel_id: str, body: JSON, files: list[JSON], *,
                    flags: int | None = None, extra: JSON | None = None) -> JSON:
        """A new message by the bot from a create-message body (checked as Discord does)."""
        fields = self.message_fields(body, partial=False, channel_id=channel_id, files=files)
        if not (fields["content"] or fields["embeds"] or fields["components"]
                or fields["attachments"] or body.get("sticker_ids") or body.get("poll")):
            raise DiscordError(400, 50006, "Cannot send an empty message")
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > 25:
            raise form_error("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        referenced = self._reference(channel_id, body.get("message_reference"))
        msg = p.message(p.new_id(), channel_id, self.world.user(self.world.bot_id),
                        fields["content"], referenced=referenced, nonce=nonce,
                        flags=body.get("flags", 0) if flags is None else flags)
        msg.update(fields)
        if referenced is not None:
            msg["mentions"], msg["mention_everyone"] = self.mentions(
                fields["content"], body.get("allowed_mentions"), referenced["author"])
        return dict(msg, **(extra or {}))

    def message_fields(self, body: JSON, *, partial: bool, channel_id: str,
                       files: list[JSON] | None = None) -> JSON:
        """The fields a create or edit body sets (an edit sets only those present)."""
        out: JSON = {}
        if "content" in body or not partial:
            content = body.get("content") or ""
            if len(content) > 2000:
                raise form_error("content", "BASE_TYPE_MAX_LENGTH",
                                 "Must be 2000 or fewer in length.")
            out["content"] = content
            out["mentions"], out["mention_everyone"] = self.mentions(
                content, body.get("allowed_mentions"), None)
        if "components" in body or not partial:
            out["components"] = interactions.check_components(body.get("components") or [])
        if "embeds" in body or not partial:
            out["embeds"] = list(body.get("embeds") or [])
        if files or not partial:
            out["attachments"] = [self._attach(channel_id, f) for f in files or []]
        if partial and "flags" in body:
            out["flags"] = body["flags"]
        return out

    def _attach(self, channel_id: str, upload: JSON) -> JSON:
        """An uploaded file as an attachment; its bytes kept in ``uploaded`` by id."""
        shown = {k: v for k, v in upload.items() if k != "_data"}
        self.uploaded[str(upload["id"])] = upload.get("_data", b"")
        return _attachment(channel_id, shown)

    def _reference(self, channel_id: str, ref: JSON | None) -> JSON | None:
        if not ref:
            return None
        where = str(ref.get("channel_id") or channel_id)
        found = self.store.find(where, str(ref.get("message_id")), ephemeral=False)
        if found is None:
            if ref.get("fail_if_not_exists", True):
                raise form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                                 "Unknown message")
            return None
        # a referenced message is shown without its own reference's message
        return {k: v for k, v in found.items() if k != "referenced_message"}

    def mentions(self, content: str, allowed: JSON | None, replied: JSON | None
                 ) -> tuple[list[JSON], bool]:
        """Users pinged by ``content`` as ``allowed_mentions`` permits (Discord's defaults:
        everything, and the replied-to author, when it is absent)."""
        parse = {"users", "roles", "everyone"} if allowed is None else set(allowed.get("parse", []))
        listed = {str(u) for u in (allowed or {}).get("users", [])}
        ids = list(dict.fromkeys(_MENTION.findall(content)))
        users = [self.world.user(i) for i in ids if "users" in parse or i in listed]
        ping_author = True if allowed is None else bool(allowed.get("replied_user", False))
        if replied is not None and ping_author and replied["id"] not in ids:
            users.append(self.world.user(replied["id"]))
        everyone = "everyone" in parse and ("@everyone" in content or "@here" in content)
        return users, everyone

    def for_gateway(self, msg: JSON) -> JSON:
        """A stored message as MESSAGE_CREATE carries it (guild fields added)."""
        guild_id = self.world.guild_of(msg["channel_id"])
        if guild_id is None:
            return dict(msg)
        return p.in_guild(msg, guild_id, self.world.joined_at(guild_id, msg["author"]["id"]))


def _attachment(channel_id: str, upload: JSON) -> JSON:
    """An uploaded file as a message's attachment (its CDN URLs made up, never fetched)."""
    path = f"attachments/{channel_id}/{upload['id']}/{upload['filename']}"
    return dict(upload, url=f"https://cdn.discordapp.com/{path}",
                proxy_url=f"https://media.discordapp.net/{path}")
