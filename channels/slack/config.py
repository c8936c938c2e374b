"""``[channels.slack]`` in agent.toml (the key names are the contract)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime import ConfigError

from ..access import Access, RuleConfig, access_of, shorthand
from ..origins import file_origin

__all__ = ["DEFAULT_API_URL", "SlackConfig", "SlackSecrets"]

DEFAULT_API_URL = "https://slack.com/api/"


@dataclass(frozen=True, slots=True)
class SlackSecrets:
    bot_token: str
    app_token: str | None
    signing_secret: str | None


class SlackConfig(BaseModel):
    """Where the Slack app's tokens are, how events arrive, and who may talk."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True,
                          description="false: Slack is not served (the section is kept)")
    mode: Literal["socket", "http"] = Field(
        default="socket", description="socket: Socket Mode (needs app_token_env); http: the "
        "Events API at POST /slack/events on the HTTP API (needs signing_secret_env)")
    bot_token_env: str = Field(default="SLACK_BOT_TOKEN",
                               description="the variable holding the bot token (xoxb-...)")
    app_token_env: str = Field(default="SLACK_APP_TOKEN", description=(
        "mode socket: the variable holding the app-level token (xapp-...)"))
    signing_secret_env: str = Field(default="SLACK_SIGNING_SECRET", description=(
        "mode http: the variable holding the signing secret requests are verified with"))
    api_url: str = Field(default=DEFAULT_API_URL,
                         description="the Web API base (a proxy, GovSlack, a test server)")
    file_hosts: list[str] = Field(
        default_factory=list, description="origins besides https://files.slack.com that "
        "shared files may be downloaded from with the bot token ('http://127.0.0.1:8123': "
        "scheme, host and port, matched exactly; plain http on loopback only): a test "
        "server; api_url's origin is not one unless listed")
    open: bool = Field(default=False, description="true: everyone in the workspace is served")
    allow_users: list[str] = Field(
        default_factory=list, description="only these users (in allow_channels, if listed)")
    allow_channels: list[str] = Field(
        default_factory=list, description="only in these channels (only allow_users, if "
        "listed)")
    allow_dms: bool = Field(default=True, description="listed users (everyone, if open) may "
                            "also DM the bot")
    approvers: list[str] = Field(
        default_factory=list, description="Slack user ids who may decide approvals; empty: "
        "[agent] approvers")
    rules: list[RuleConfig] = Field(
        default_factory=list, description="explicit rules, added to what the keys above "
        "grant: a place (channel id, 'dm' or '*'), optional users, rights")
    reply_to_bots: bool = Field(default=False, description=(
        "true: other bots' messages are taken like people's (never the bot's own)"))
    suggested_prompts: list[str] = Field(
        default_factory=list, description="up to four prompts offered when a person opens a "
        "new assistant thread (the assistant view)")
    stream: Literal["native", "edit", "off"] = Field(
        default="native", description="native: replies stream into their thread as the "
        "model writes them (chat.startStream), tool calls shown as tasks; edit: one message "
        "posted and updated as it grows (also where Slack refuses native streaming); off: "
        "the finished reply only")
    stream_every_s: float = Field(
        default=0.25, gt=0, description="the least time between two appends to a stream")
    edit_every_s: float = Field(
        default=1.0, gt=0, description="the least time between two edits of a reply shown "
        "by edits")
    reconnect_max_s: float = Field(
        default=60.0, gt=0, description="while Slack cannot be reached at start, the longest "
        "wait between attempts (they back off from 1 s, with jitter)")

    @field_validator("file_hosts")
    @classmethod
    def _file_hosts(cls, value: list[str]) -> list[str]:
        return [file_origin(entry) for entry in value]  # ValueError: pydantic names the key

    @property
    def access(self) -> Access:
        """Who may talk, approve and operate where: the shorthand keys, then ``rules``."""
        return access_of(self.rules, *shorthand(
            open=self.open, users=self.allow_users, places=self.allow_channels,
            approvers=self.approvers, allow_dms=self.allow_dms))

    def needed_envs(self) -> list[str]:
        """The variables this mode needs."""
        second = self.app_token_env if self.mode == "socket" else self.signing_secret_env
        return [self.bot_token_env, second]

    def bot_token(self, env: Mapping[str, str] | None = None) -> str:
        """The bot token alone (``maiden check`` probes with it whatever else is unset);
        ``ConfigError`` if it is unset."""
        value = (os.environ if env is None else env).get(self.bot_token_env)
        if not value:
            raise ConfigError([("channels.slack.bot_token_env",
                                f"${self.bot_token_env} is not set")])
        return value

    def secrets(self, env: Mapping[str, str] | None = None,
                source: str | None = None) -> SlackSecrets:
        """The tokens from the environment; ``ConfigError`` naming each unset variable."""
        env = os.environ if env is None else env
        missing = [name for name in self.needed_envs() if not env.get(name)]
        if missing:
            key = {self.bot_token_env: "bot_token_env", self.app_token_env: "app_token_env",
                   self.signing_secret_env: "signing_secret_env"}
            raise ConfigError([(f"channels.slack.{key[name]}",
                                f"${name} is not set (needed for mode = {self.mode!r})")
                               for name in missing], source)
        return SlackSecrets(bot_token=env[self.bot_token_env],
                            app_token=env.get(self.app_token_env) or None,
                            signing_secret=env.get(self.signing_secret_env) or None)
