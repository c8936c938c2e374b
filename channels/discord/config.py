"""``[channels.discord]`` in agent.toml (the key names are the contract)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime import ConfigError

from ..access import Access, RuleConfig, access_of, shorthand
from ..origins import file_origin

__all__ = ["DEFAULT_API_URL", "DiscordConfig"]

DEFAULT_API_URL = "https://discord.com/api/v10"


class DiscordConfig(BaseModel):
    """The bot's token, where Discord's API is, and who may talk."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True,
                          description="false: Discord is not served (the section is kept)")
    token_env: str = Field(default="DISCORD_BOT_TOKEN",
                           description="the variable holding the bot token")
    api_url: str = Field(default=DEFAULT_API_URL,
                         description="the REST base (a proxy or a test server); the gateway "
                         "is found from it (GET /gateway/bot)")
    file_hosts: list[str] = Field(
        default_factory=list, description="origins besides Discord's CDN "
        "(https://cdn.discordapp.com, https://media.discordapp.net) that attachments may be "
        "downloaded from ('http://127.0.0.1:8123': scheme, host and port, matched exactly; "
        "plain http on loopback only): a test server; api_url's origin is not one unless "
        "listed")
    open: bool = Field(default=False, description="true: everyone the bot can see is served")
    allow_guilds: list[str] = Field(
        default_factory=list, description="only in these guilds (with allow_channels: or "
        "those channels; only allow_users, if listed)")
    allow_channels: list[str] = Field(
        default_factory=list, description="only in these channels and their threads (with "
        "allow_guilds: or those guilds; only allow_users, if listed)")
    allow_users: list[str] = Field(
        default_factory=list, description="only these users (in the listed guilds and "
        "channels, if any)")
    allow_dms: bool = Field(default=True, description="listed users (everyone, if open) may "
                            "also DM the bot")
    approvers: list[str] = Field(
        default_factory=list, description="Discord user ids who may decide approvals; empty: "
        "[agent] approvers, else anyone allowed to talk")
    rules: list[RuleConfig] = Field(
        default_factory=list, description="explicit rules, added to what the keys above "
        "grant: a place (guild or channel id, 'dm' or '*'), optional users, rights")
    reply_to_bots: bool = Field(default=False, description=(
        "true: other bots' messages are taken like people's (never the bot's own)"))
    reconnect_max_s: float = Field(
        default=60.0, gt=0, description="while Discord cannot be reached at start, the longest "
        "wait between attempts (they back off from 1 s, with jitter)")
    stream: Literal["edit", "off"] = Field(
        default="edit", description="edit: a reply is posted with its first text and edited "
        "as the model writes it, tool calls on a status line; off: the finished reply only")
    edit_every_s: float = Field(
        default=1.5, gt=0, description="the least time between two edits of a streaming "
        "reply (edits share Discord's 5-per-5-seconds budget with sends)")
    commands: Literal["guilds", "global", "off"] = Field(default="guilds", description=(
        "where /maiden is registered at start: in the allowed guilds (every guild the bot "
        "is in, without allow_guilds; at once), globally (Discord may take an hour to show "
        "it), or not at all"))
    respond_in: Literal["mentions", "all"] = Field(
        default="mentions", description="mentions: in guild channels only mentions of the bot "
        "and replies to it start work (threads it is part of and DMs: every message)")

    catch_up_s: float = Field(
        default=900.0, ge=0, description="at each new gateway session (a start, a replica "
        "taking over, a connection Discord would not resume), the messages of this many "
        "seconds back that the bot was not sent are read back and answered; 0: none")

    @field_validator("file_hosts")
    @classmethod
    def _file_hosts(cls, value: list[str]) -> list[str]:
        return [file_origin(entry) for entry in value]  # ValueError: pydantic names the key

    @property
    def access(self) -> Access:
        """Who may talk, approve and operate where: the shorthand keys, then ``rules``."""
        return access_of(self.rules, *shorthand(
            open=self.open, users=self.allow_users,
            places=[*self.allow_guilds, *self.allow_channels], approvers=self.approvers,
            allow_dms=self.allow_dms))

    def token(self, env: Mapping[str, str] | None = None, source: str | None = None) -> str:
        """The bot token from the environment; ``ConfigError`` naming the variable."""
        value = (os.environ if env is None else env).get(self.token_env)
        if not value:
            raise ConfigError([("channels.discord.token_env",
                                f"${self.token_env} is not set")], source)
        return value
