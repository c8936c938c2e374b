"""Who and what exists in the fake Discord: the bot and its application, users, guilds with
their channels, threads and members, and DM channels.

``World()`` is a small ready-made world (the ids are the constants in ``payloads``): the bot
``maiden`` in the guild ``maiden-test`` with a category, ``#general`` and a public thread in
it, one person (``ada``) who is a member and has a DM channel with the bot. Add more with the
``add_*`` methods before the client connects: GUILD_CREATE is built from this at IDENTIFY.
"""

from __future__ import annotations

import copy

from . import payloads as p
from .payloads import JSON, Id

# VIEW_CHANNEL, SEND_MESSAGES, SEND_MESSAGES_IN_THREADS, EMBED_LINKS, ATTACH_FILES,
# READ_MESSAGE_HISTORY, ADD_REACTIONS, USE_EXTERNAL_EMOJIS, CREATE_PUBLIC_THREADS
EVERYONE_PERMISSIONS = ((1 << 10) | (1 << 11) | (1 << 38) | (1 << 14) | (1 << 15) | (1 << 16)
                        | (1 << 6) | (1 << 18) | (1 << 35))


class World:
    """The fake's directory. Ids are stored as strings, as Discord's JSON has them."""

    def __init__(self, *, token: str = p.TOKEN, app_id: Id = p.APP_ID, bot_name: str = "maiden",
                 privileged: int = p.PRIVILEGED, empty: bool = False) -> None:
        self.token = token
        self.app_id = str(app_id)
        self.privileged = privileged
        """Privileged intents enabled for the app; IDENTIFY asking for others is closed 4014."""
        self.users: dict[str, JSON] = {}
        self.channels: dict[str, JSON] = {}
        self._guilds: dict[str, JSON] = {}
        self._members: dict[str, dict[str, JSON]] = {}
        self.bot = self.add_user(app_id, bot_name, bot=True)
        self.owner = self.add_user(p.HUMAN_ID, "ada")
        if not empty:
            self.add_guild(p.GUILD_ID, "maiden-test", owner_id=p.HUMAN_ID)
            self.add_category(p.CATEGORY_ID, p.GUILD_ID, "Text Channels")
            self.add_text_channel(p.GENERAL_ID, p.GUILD_ID, "general", parent_id=p.CATEGORY_ID)
            self.add_thread(p.THREAD_ID, p.GENERAL_ID, "maiden thread", owner_id=p.HUMAN_ID)
            self.add_dm(p.DM_ID, p.HUMAN_ID)

    @property
    def bot_id(self) -> str:
        return str(self.bot["id"])

    # -- building the world

    def add_user(self, user_id: Id, username: str, *, bot: bool = False,
                 global_name: str | None = None) -> JSON:
        """``global_name``: the name the person shows (their username if None)."""
        self.users[str(user_id)] = p.user(user_id, username, bot=bot, global_name=global_name)
        return self.users[str(user_id)]

    def add_guild(self, guild_id: Id, name: str, *, owner_id: Id) -> None:
        """A guild the bot is in (it and the owner are members; ``@everyone`` may talk)."""
        gid = str(guild_id)
        self._guilds[gid] = {"id": gid, "name": name, "owner_id": str(owner_id),
                             "roles": [p.role(gid, "@everyone", EVERYONE_PERMISSIONS)]}
        self._members[gid] = {}
        self.add_member(gid, self.bot_id)
        self.add_member(gid, owner_id)

    def add_member(self, guild_id: Id, user_id: Id) -> None:
        uid = str(user_id)
        if uid not in self.users:
            self.add_user(uid, p.default_username(uid))
        self._members[str(guild_id)][uid] = p.member(p.now_iso())

    def add_category(self, channel_id: Id, guild_id: Id, name: str) -> JSON:
        return self._add(p.category(channel_id, guild_id, name, position=self._next(guild_id)))

    def add_text_channel(self, channel_id: Id, guild_id: Id, name: str, *,
                         parent_id: Id | None = None, private: bool = False) -> JSON:
        """``private``: ``@everyone`` (the role whose id is the guild's) is denied
        VIEW_CHANNEL, the bot allowed it, as Discord's "Private Channel" switch sets
        (topics/permissions#permission-overwrites)."""
        channel = p.text_channel(channel_id, guild_id, name, parent_id=parent_id,
                                 position=self._next(guild_id))
        if private:
            channel["permission_overwrites"] = [
                p.overwrite(guild_id, deny=p.VIEW_CHANNEL),
                p.overwrite(self.bot_id, member=True, allow=EVERYONE_PERMISSIONS)]
        return self._add(channel)

    def add_thread(self, thread_id: Id, parent_id: Id, name: str, *, owner_id: Id,
                   private: bool = False) -> JSON:
        guild_id = self.channels[str(parent_id)]["guild_id"]
        return self._add(p.thread(thread_id, guild_id, parent_id, owner_id, name,
                                  private=private))

    def add_dm(self, channel_id: Id, user_id: Id) -> JSON:
        return self._add(p.dm_channel(channel_id, self.users[str(user_id)]))

    def _add(self, channel: JSON) -> JSON:
        self.channels[channel["id"]] = channel
        return channel

    def _next(self, guild_id: Id) -> int:
        return sum(1 for c in self.channels.values() if c.get("guild_id") == str(guild_id))

    # -- reading it

    @property
    def guild_ids(self) -> list[str]:
        return list(self._guilds)

    def guild_of(self, channel_id: Id) -> str | None:
        channel = self.channels.get(str(channel_id))
        return None if channel is None else channel.get("guild_id")

    def is_member(self, guild_id: Id, user_id: Id) -> bool:
        return str(user_id) in self._members.get(str(guild_id), {})

    def joined_at(self, guild_id: Id, user_id: Id) -> str:
        found = self._members.get(str(guild_id), {}).get(str(user_id))
        return found["joined_at"] if found else p.iso(p.snowflake_time(guild_id))

    def dm_with(self, user_id: Id) -> JSON | None:
        for channel in self.channels.values():
            if channel["type"] == p.DM and channel["recipients"][0]["id"] == str(user_id):
                return channel
        return None

    def user(self, user_id: Id) -> JSON:
        """A known user, or a stand-in with a made-up name (Discord knows everyone)."""
        found = self.users.get(str(user_id))
        return copy.deepcopy(found) if found else p.user(user_id, p.default_username(user_id))

    def members(self, guild_id: Id) -> list[JSON]:
        """Members with their ``user`` (as GUILD_CREATE and member chunks carry them)."""
        return [dict(m, user=self.user(uid))
                for uid, m in self._members.get(str(guild_id), {}).items()]

    def guild_create(self, guild_id: Id) -> JSON:
        info = self._guilds[str(guild_id)]
        channels = [c for c in self.channels.values()
                    if c.get("guild_id") == info["id"] and c["type"] not in p.THREADS]
        threads = [c for c in self.channels.values()
                   if c.get("guild_id") == info["id"] and c["type"] in p.THREADS]
        joined = self.joined_at(guild_id, self.bot_id)
        return p.guild(info["id"], info["name"], info["owner_id"], channels=copy.deepcopy(channels),
                       threads=copy.deepcopy(threads), members=self.members(guild_id),
                       roles=info["roles"], joined_at=joined)

    def application(self) -> JSON:
        return p.application(self.app_id, self.bot["username"], self.user(self.bot_id),
                             self.user(self.owner["id"]), privileged=self.privileged)
