"""The REST API's routes, each a method over the world and the store.

Routes are Discord's own templates as discord.py names them (``/channels/{channel_id}/
messages``); ``routes.py`` matches a request to one and holds it to its entry in
``contract.py`` (the token, the body's shape and limits, an empty message) before calling the
handler with a ``Request``. Handlers answer ``(status, body)`` — ``None`` for 204 — or raise
``DiscordError`` for what needs the fake's state: unknown channels, messages and
interactions, editing someone else's message, a reply to a message that is not there,
answering an interaction twice.
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
from .store import DiscordError, Store, form_error, unknown
from .world import World

Answer = tuple[int, Any]
Echo = Callable[[str, JSON], Awaitable[None]]

_MENTION = re.compile(r"<@!?(\d{15,21})>")


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
    """Every route the fake serves; ``table()`` lists them (``contract.py`` says the rest)."""

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

    def table(self) -> list[tuple[str, str, Handler]]:
        it = self.interactions
        message = "/channels/{channel_id}/messages/{message_id}"
        hooked = "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}"
        return [
            ("GET", "/users/@me", self.me),
            ("GET", "/users/{user_id}", self.get_user),
            ("POST", "/users/@me/channels", self.open_dm),
            ("GET", "/gateway/bot", self.gateway_bot),
            ("GET", "/oauth2/applications/@me", self.application),
            ("GET", "/applications/@me", self.application),
            ("GET", "/channels/{channel_id}", self.get_channel),
            ("POST", "/channels/{channel_id}/typing", self.send_typing),
            ("GET", "/channels/{channel_id}/messages", self.history),
            ("POST", "/channels/{channel_id}/messages", self.send),
            ("GET", message, self.get_message),
            ("PATCH", message, self.edit),
            ("DELETE", message, self.delete),
            ("PUT", message + "/reactions/{emoji}/@me", self.react),
            ("DELETE", message + "/reactions/{emoji}/@me", self.unreact),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands",
             self.put_commands),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands",
             self.get_commands),
            ("PUT", "/applications/{application_id}/commands", self.put_commands),
            ("GET", "/applications/{application_id}/commands", self.get_commands),
            ("POST", "/interactions/{webhook_id}/{webhook_token}/callback", it.callback),
            ("POST", "/webhooks/{webhook_id}/{webhook_token}", it.follow_up),
            ("GET", hooked, it.get),
            ("PATCH", hooked, it.edit),
            ("DELETE", hooked, it.delete),
        ]

    # -- application commands

    async def put_commands(self, req: Request) -> Answer:
        """Bulk overwrite: the application's commands in a guild (or global) become these."""
        where = str(req.params.get("guild_id") or "global")
        if where != "global" and where not in self.world.guild_ids:
            raise DiscordError(404, 10004, "Unknown Guild")
        assert isinstance(req.body, list)  # the contract saw to it
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
        limit = int(q.get("limit", "50"))  # 1-100, as the contract saw to
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
            if channel["type"] in p.THREADS:
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
        """Edit a message (``ephemeral``: through an interaction's webhook, which reaches
        ephemeral messages too and parses mentions as webhooks do)."""
        fields = self.message_fields(body, partial=True, channel_id=channel_id,
                                     webhook=ephemeral)
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
        """A new message by the bot from a create-message body the contract let through (with
        ``extra``: an interaction's, so sent through its webhook)."""
        fields = self.message_fields(body, partial=False, channel_id=channel_id, files=files,
                                     webhook=extra is not None)
        nonce = body.get("nonce")
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
                       files: list[JSON] | None = None, webhook: bool = False) -> JSON:
        """The fields a create or edit body sets (an edit sets only those present)."""
        out: JSON = {}
        if "content" in body or not partial:
            content = body.get("content") or ""
            out["content"] = content
            out["mentions"], out["mention_everyone"] = self.mentions(
                content, body.get("allowed_mentions"), None, webhook=webhook)
        if "components" in body or not partial:
            out["components"] = interactions.numbered(body.get("components") or [])
        if "embeds" in body or not partial:
            out["embeds"] = list(body.get("embeds") or [])
        if files or not partial:
            out["attachments"] = [self._attach(channel_id, f) for f in files or []]
        if partial and "flags" in body:
            out["flags"] = body["flags"]
        return out

    def _attach(self, channel_id: str, upload: JSON) -> JSON:
        """An uploaded file as an attachment; its bytes kept in ``uploaded`` by id."""
        shown = {k: v for k, v in upload.items() if not k.startswith("_")}
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

    def mentions(self, content: str, allowed: JSON | None, replied: JSON | None, *,
                 webhook: bool = False) -> tuple[list[JSON], bool]:
        """Users pinged by ``content`` as ``allowed_mentions`` permits. Without it, Discord
        parses everything in a message, users only in an interaction's or a webhook's, and
        pings the replied-to author (resources/message#allowed-mentions-object)."""
        default = {"users"} if webhook else {"users", "roles", "everyone"}
        parse = default if allowed is None else set(allowed.get("parse", []))
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
