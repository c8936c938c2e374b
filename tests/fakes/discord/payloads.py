"""What Discord sends: snowflakes, users, members, channels, guilds, messages, interactions.

Pure builders of the JSON shapes of API v10, as recorded from real gateway and REST traffic
(ids are strings, timestamps ISO 8601 with microseconds and ``+00:00``, absent optionals are
``null`` rather than missing where Discord sends them). They take ids as ``int`` or ``str`` and
know nothing of the fake's state: ``world.py`` keeps who exists, ``store.py`` what was said.

Snowflakes are real ones: milliseconds since 2015-01-01 in the top 42 bits, then worker,
process and increment, so discord.py's ``snowflake_time`` dates them and ids sort by time.
"""

from __future__ import annotations

import base64
import datetime
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

JSON = dict[str, Any]
Id = int | str

DISCORD_EPOCH_MS = 1_420_070_400_000
API_VERSION = 10

# Intents (gateway ``IDENTIFY.d.intents`` bits) the fake acts on.
GUILDS = 1 << 0
GUILD_MEMBERS = 1 << 1
GUILD_PRESENCES = 1 << 8
GUILD_MESSAGES = 1 << 9
GUILD_MESSAGE_TYPING = 1 << 11
DIRECT_MESSAGES = 1 << 12
DIRECT_MESSAGE_TYPING = 1 << 14
MESSAGE_CONTENT = 1 << 15
PRIVILEGED = GUILD_MEMBERS | GUILD_PRESENCES | MESSAGE_CONTENT

# Channel types.
GUILD_TEXT = 0
DM = 1
GUILD_CATEGORY = 4
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
THREADS = (PUBLIC_THREAD, PRIVATE_THREAD)

VIEW_CHANNEL = 1 << 10
"""topics/permissions#permissions-bitwise-permission-flags."""

MEMBER_PERMISSIONS = "2248473465835073"
"""The permissions an interaction says its user and the app have (a member's usual set)."""

# Message flags.
EPHEMERAL = 1 << 6
LOADING = 1 << 7


def snowflake_at(ms: int, increment: int = 0, *, worker: int = 1, process: int = 0) -> int:
    """The snowflake of Unix time ``ms`` (milliseconds)."""
    return ((ms - DISCORD_EPOCH_MS) << 22) | (worker << 17) | (process << 12) | (increment & 0xFFF)


def snowflake_time(value: Id) -> datetime.datetime:
    ms = (int(value) >> 22) + DISCORD_EPOCH_MS
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


class Snowflakes:
    """Increasing snowflakes from the wall clock: each call is later than the one before."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            self._last = max(snowflake_at(int(time.time() * 1000)), self._last + 1)
            return self._last


new_id = Snowflakes()
"""The one generator every builder and the fake share, so all ids order by creation."""

_FIXED_MS = 1_700_000_000_000  # 2023-11-14: the fixed ids of the default world predate any run

# The default world (``World()``): a guild with #general, a thread in it, a person, a DM.
APP_ID = snowflake_at(_FIXED_MS, 1)
BOT_ID = APP_ID  # a bot user shares its application's id
GUILD_ID = snowflake_at(_FIXED_MS + 1_000, 1)
CATEGORY_ID = snowflake_at(_FIXED_MS + 2_000, 1)
GENERAL_ID = snowflake_at(_FIXED_MS + 2_000, 2)
THREAD_ID = snowflake_at(_FIXED_MS + 3_000, 1)
HUMAN_ID = snowflake_at(_FIXED_MS - 86_400_000, 7)
DM_ID = snowflake_at(_FIXED_MS + 4_000, 1)
TOKEN = "MTE3NDE4NzE1MzI2MjU5NjA5Ng.GfAkeT.ZmFrZS1kaXNjb3JkLXRva2VuLWZvci10ZXN0cy0x"


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).isoformat(timespec="microseconds")


def now_iso() -> str:
    return iso(datetime.datetime.now(datetime.UTC))


def user(user_id: Id, username: str, *, bot: bool = False, global_name: str | None = None
         ) -> JSON:
    """A user object; bots keep a four-digit discriminator, people have ``"0"``."""
    out: JSON = {"id": str(user_id), "username": username,
                 "discriminator": f"{int(user_id) % 9000 + 1000}" if bot else "0",
                 "global_name": None if bot else (global_name or username), "avatar": None,
                 "avatar_decoration_data": None, "public_flags": 0, "flags": 0,
                 "banner": None, "accent_color": None, "collectibles": None,
                 "primary_guild": None}
    if bot:
        out["bot"] = True
    return out


def default_username(user_id: Id) -> str:
    return f"user{int(user_id) % 100_000:05d}"


def member(joined: str, *, roles: Sequence[Id] = (), with_user: JSON | None = None) -> JSON:
    """A guild member; messages carry it without ``user``, GUILD_CREATE with it."""
    out: JSON = {"roles": [str(r) for r in roles], "nick": None, "avatar": None, "banner": None,
                 "joined_at": joined, "premium_since": None, "deaf": False, "mute": False,
                 "pending": False, "flags": 0, "communication_disabled_until": None}
    if with_user is not None:
        out["user"] = with_user
    return out


def text_channel(channel_id: Id, guild_id: Id, name: str, *, position: int = 0,
                 parent_id: Id | None = None, topic: str | None = None) -> JSON:
    return {"id": str(channel_id), "type": GUILD_TEXT, "guild_id": str(guild_id), "name": name,
            "position": position, "flags": 0,
            "parent_id": None if parent_id is None else str(parent_id), "topic": topic,
            "nsfw": False, "rate_limit_per_user": 0, "last_message_id": None,
            "permission_overwrites": [], "icon_emoji": None, "theme_color": None}


def overwrite(target_id: Id, *, member: bool = False, allow: int = 0, deny: int = 0
              ) -> JSON:
    """A permission overwrite (resources/channel#overwrite-object): ``id`` a role's or a
    member's, ``type`` 0 (role) or 1 (member), ``allow`` and ``deny`` permission bit sets as
    strings. The ``@everyone`` role's id is the guild's (topics/permissions#role-object)."""
    return {"id": str(target_id), "type": 1 if member else 0, "allow": str(allow),
            "deny": str(deny)}


def category(channel_id: Id, guild_id: Id, name: str, *, position: int = 0) -> JSON:
    return {"id": str(channel_id), "type": GUILD_CATEGORY, "guild_id": str(guild_id),
            "name": name, "position": position, "flags": 0, "permission_overwrites": []}


def thread(thread_id: Id, guild_id: Id, parent_id: Id, owner_id: Id, name: str, *,
           private: bool = False) -> JSON:
    """A public thread (type 11) in a text channel; ``private``: a private thread (type 12),
    which only its members and those who may manage threads see (resources/channel
    #channel-object-channel-types), with ``thread_metadata.invitable``."""
    created = iso(snowflake_time(thread_id))
    metadata: JSON = {"invitable": True} if private else {}
    return {"id": str(thread_id), "type": PRIVATE_THREAD if private else PUBLIC_THREAD,
            "guild_id": str(guild_id),
            "parent_id": str(parent_id), "owner_id": str(owner_id), "name": name, "flags": 0,
            "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
            "member_count": 1, "total_message_sent": 0, "member_ids_preview": [str(owner_id)],
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                "archive_timestamp": created, "locked": False,
                                "create_timestamp": created, **metadata}}


def dm_channel(channel_id: Id, recipient: JSON) -> JSON:
    return {"id": str(channel_id), "type": DM, "flags": 0, "last_message_id": None,
            "recipients": [recipient]}


def role(role_id: Id, name: str, permissions: int, *, position: int = 0,
         managed: bool = False) -> JSON:
    return {"id": str(role_id), "name": name, "permissions": str(permissions), "position": position,
            "color": 0, "colors": {"primary_color": 0, "secondary_color": None,
                                   "tertiary_color": None},
            "hoist": False, "managed": managed, "mentionable": False, "icon": None,
            "unicode_emoji": None, "flags": 0, "description": None}


def guild(guild_id: Id, name: str, owner_id: Id, *, channels: Sequence[JSON] = (),
          threads: Sequence[JSON] = (), members: Sequence[JSON] = (), roles: Sequence[JSON] = (),
          joined_at: str | None = None) -> JSON:
    """A GUILD_CREATE payload: the guild with its channels, active threads and members."""
    return {
        "id": str(guild_id), "name": name, "icon": None, "splash": None, "banner": None,
        "description": None, "owner_id": str(owner_id), "application_id": None,
        "afk_channel_id": None, "afk_timeout": 300, "system_channel_id": None,
        "system_channel_flags": 0, "rules_channel_id": None, "public_updates_channel_id": None,
        "safety_alerts_channel_id": None, "verification_level": 1, "explicit_content_filter": 2,
        "default_message_notifications": 1, "mfa_level": 0, "nsfw_level": 0, "nsfw": False,
        "premium_tier": 0, "premium_subscription_count": 0, "premium_progress_bar_enabled": False,
        "preferred_locale": "en-US", "vanity_url_code": None, "discovery_splash": None,
        "features": [], "emojis": [], "stickers": [], "max_members": 500000,
        "max_video_channel_users": 25, "max_stage_video_channel_users": 50,
        "roles": list(roles), "channels": [_in_guild_create(c) for c in channels],
        "threads": list(threads), "members": list(members), "member_count": len(members),
        "presences": [], "voice_states": [], "stage_instances": [],
        "guild_scheduled_events": [], "soundboard_sounds": [], "embedded_activities": [],
        "activity_instances": [], "incidents_data": None, "hub_type": None, "lazy": True,
        "large": False, "unavailable": False, "joined_at": joined_at or now_iso(),
        "version": int(time.time() * 1000), "inventory_settings": None,
    }


def _in_guild_create(channel: JSON) -> JSON:
    """GUILD_CREATE lists a guild's channels without their ``guild_id``."""
    return {k: v for k, v in channel.items() if k != "guild_id"}


def message(message_id: Id, channel_id: Id, author: JSON, content: str, *,
            mentions: Sequence[JSON] = (), mention_everyone: bool = False,
            referenced: JSON | None = None, components: Sequence[JSON] = (),
            nonce: str | int | None = None, flags: int = 0,
            attachments: Sequence[JSON] = (), embeds: Sequence[JSON] = ()) -> JSON:
    """A message object as the REST API returns it (the gateway adds guild fields)."""
    out: JSON = {
        "type": 0 if referenced is None else 19, "content": content, "mentions": list(mentions),
        "mention_roles": [], "attachments": list(attachments), "embeds": list(embeds),
        "timestamp": iso(snowflake_time(message_id)), "edited_timestamp": None, "flags": flags,
        "components": list(components), "id": str(message_id), "channel_id": str(channel_id),
        "author": author, "pinned": False, "mention_everyone": mention_everyone, "tts": False,
    }
    if nonce is not None:
        out["nonce"] = nonce
    if referenced is not None:
        out["message_reference"] = {"type": 0, "channel_id": referenced["channel_id"],
                                    "message_id": referenced["id"]}
        if "guild_id" in referenced:
            out["message_reference"]["guild_id"] = referenced["guild_id"]
        out["referenced_message"] = referenced
    return out


def in_guild(msg: JSON, guild_id: Id, joined: str) -> JSON:
    """The gateway form of a guild message: ``guild_id``, the author's ``member`` (not for
    webhooks), and a ``member`` on each mentioned user."""
    out = dict(msg, guild_id=str(guild_id))
    if msg.get("webhook_id") is None:
        out["member"] = member(joined)
    out["mentions"] = [dict(u, member=member(joined)) for u in msg["mentions"]]
    return out


def message_create(channel_id: Id, author_id: Id, content: str, *, guild_id: Id | None = None,
                   mentions: Sequence[Id | JSON] = (), referenced: JSON | None = None,
                   bot: bool = False, message_id: Id | None = None,
                   username: str | None = None) -> JSON:
    """The ``d`` of a MESSAGE_CREATE someone (or, with ``bot=True``, some bot) wrote.

    ``mentions`` are user ids or user objects; ``referenced`` makes it a reply (type 19).
    """
    mid = new_id() if message_id is None else message_id
    author = user(author_id, username or default_username(author_id), bot=bot)
    mentioned = [m if isinstance(m, dict) else user(m, default_username(m)) for m in mentions]
    msg = message(mid, channel_id, author, content, mentions=mentioned, referenced=referenced,
                  nonce=None if bot else str(new_id()))
    if guild_id is None:
        return msg
    joined = iso(snowflake_time(int(guild_id)))
    return in_guild(msg, guild_id, joined)


def interaction_token(interaction_id: Id) -> str:
    raw = f"interaction:{interaction_id}:{secrets.token_urlsafe(48)}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def command_interaction(name: str, options: Sequence[JSON], user_id: Id, channel_id: Id,
                        guild_id: Id | None = None, *, application_id: Id = APP_ID,
                        command_id: str = "0", autocomplete: bool = False) -> JSON:
    """The ``d`` of an INTERACTION_CREATE for an application command (type 2), or, with
    ``autocomplete``, for its option being typed (type 4, the focused option marked)."""
    shell = component_interaction("", user_id, channel_id, {"id": "0"}, guild_id,
                                  application_id=application_id)
    shell.pop("message")
    shell["type"] = 4 if autocomplete else 2
    shell["data"] = {"id": command_id, "name": name, "type": 1, "options": list(options),
                     **({} if guild_id is None else {"guild_id": str(guild_id)})}
    return shell


def component_interaction(custom_id: str, user_id: Id, channel_id: Id, message: JSON,
                          guild_id: Id | None = None, *, application_id: Id = APP_ID,
                          component_type: int = 2, username: str | None = None,
                          values: Sequence[str] | None = None,
                          channel: JSON | None = None) -> JSON:
    """The ``d`` of an INTERACTION_CREATE for a click on a component of ``message`` (type 3).

    ``component_type`` 2 is a button; a select menu (3) also sends ``values``.
    """
    interaction_id = new_id()
    clicker = user(user_id, username or default_username(user_id))
    data: JSON = {"custom_id": custom_id, "component_type": component_type}
    if values is not None:
        data["values"] = list(values)
    in_dm = guild_id is None
    shown = channel or ({"id": str(channel_id), "type": DM, "flags": 0,
                         "last_message_id": message["id"], "recipients": [clicker]}
                        if in_dm else {"id": str(channel_id), "type": GUILD_TEXT,
                                       "guild_id": str(guild_id), "name": "general",
                                       "position": 0, "flags": 0, "nsfw": False,
                                       "permissions": MEMBER_PERMISSIONS})
    out: JSON = {
        "id": str(interaction_id), "application_id": str(application_id), "type": 3,
        "data": data, "channel_id": str(channel_id), "channel": shown,
        "token": interaction_token(interaction_id), "version": 1, "message": message,
        "locale": "en-US", "app_permissions": MEMBER_PERMISSIONS, "entitlements": [],
        "entitlement_sku_ids": [], "attachment_size_limit": 10_485_760,
        "context": 1 if in_dm else 0,
        "authorizing_integration_owners": {"0": "0" if in_dm else str(guild_id)},
    }
    if guild_id is None:
        out["user"] = clicker
    else:
        out["guild_id"] = str(guild_id)
        out["guild"] = {"id": str(guild_id), "locale": "en-US", "features": []}
        out["guild_locale"] = "en-US"
        joined = iso(snowflake_time(int(guild_id)))
        out["member"] = dict(member(joined), user=clicker, permissions=MEMBER_PERMISSIONS)
    return out


def ready(session_id: str, resume_url: str, bot: JSON, guild_ids: Sequence[Id],
          application: JSON) -> JSON:
    """The ``d`` of READY: every guild listed unavailable, to be sent by GUILD_CREATE."""
    return {
        "v": API_VERSION, "user": dict(bot, verified=True, mfa_enabled=False, email=None),
        "guilds": [{"id": str(g), "unavailable": True} for g in guild_ids],
        "session_id": session_id, "resume_gateway_url": resume_url,
        "application": {"id": application["id"], "flags": application["flags"]},
        "private_channels": [], "relationships": [], "presences": [], "user_settings": {},
        "guild_join_requests": [], "geo_ordered_rtc_regions": ["us-east", "us-central"],
        "session_type": "normal", "auth_session_id_hash": secrets.token_urlsafe(32),
        "_trace": ['["gateway-prd-fake-1",{"micros":1200}]'],
    }


# Application flags that say a privileged intent is enabled for a bot in < 100 guilds.
APP_FLAG_PRESENCE_LIMITED = 1 << 13
APP_FLAG_MEMBERS_LIMITED = 1 << 15
APP_FLAG_CONTENT_LIMITED = 1 << 19


def application(app_id: Id, name: str, bot: JSON, owner: JSON, *, privileged: int) -> JSON:
    """``GET /oauth2/applications/@me``; ``flags`` reflect the privileged intents allowed."""
    flags = ((APP_FLAG_PRESENCE_LIMITED if privileged & GUILD_PRESENCES else 0)
             | (APP_FLAG_MEMBERS_LIMITED if privileged & GUILD_MEMBERS else 0)
             | (APP_FLAG_CONTENT_LIMITED if privileged & MESSAGE_CONTENT else 0))
    return {"id": str(app_id), "name": name, "icon": None, "description": "", "summary": "",
            "type": None, "hook": True, "bot_public": False, "bot_require_code_grant": False,
            "verify_key": secrets.token_hex(32), "owner": owner, "team": None, "flags": flags,
            "bot": bot, "redirect_uris": [], "interactions_endpoint_url": None,
            "role_connections_verification_url": None, "tags": [],
            "approximate_guild_count": 1, "approximate_user_install_count": 0,
            "integration_types_config": {"0": {}}, "is_monetized": False,
            "storefront_available": False, "explicit_content_filter": 0}
