"""The channels the config enables, each made over the runtime when `maiden run` starts
them (after recovery); settings that cannot work fail before the store opens. A channel
that can tell a person's time zone lends it to the schedules' book as it is made."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from channels import Channel
from channels.http import HttpChannel
from runtime import Runtime, ScheduleService
from schedules import Scheduler

from .config import LoadedConfig
from .rights import rights_blocks

__all__ = ["ChannelFactory", "make_channels"]


ChannelFactory = Callable[[Runtime, Scheduler | None], Channel]


def make_channels(loaded: LoadedConfig) -> list[ChannelFactory]:
    """The channels the config enables, each to be made over the runtime, in the order they
    start. Settings that cannot work (a missing token) fail here, before the store opens."""
    cfg = loaded.config
    source = str(loaded.path)
    factories: list[ChannelFactory] = []
    routes: list[tuple[str, Callable[[], Callable[[Any], Awaitable[Any]]]]] = []
    made_all: list[Channel] = []  # for the console: every channel's status
    slack = cfg.channels.slack
    if slack is not None and slack.enabled:
        secrets = slack.secrets(source=source)
        made: list[Any] = []

        def make_slack(runtime: Runtime, schedules: Scheduler | None) -> Channel:
            from channels.slack.channel import SlackChannel  # slack-bolt loads only here

            channel = SlackChannel(runtime, slack, secrets, schedules=schedules)
            if schedules is not None:  # "tomorrow at 9" from Slack: 9 where its asker is
                schedules.book.zones[channel.name] = channel.zones
            made.append(channel)
            return channel

        factories.append(make_slack)
        if slack.mode == "http":
            # Served by the HTTP API, which starts after Slack (so the endpoint exists): the
            # Slack channel made last, over this start's runtime (a start begun again after
            # a store error makes its channels anew; the first ones' runtime is shut down).
            routes.append(("/slack/events", lambda: made[-1].http_endpoint()))
    discord = cfg.channels.discord
    if discord is not None and discord.enabled:
        discord_token = discord.token(source=source)

        def make_discord(runtime: Runtime, schedules: ScheduleService | None) -> Channel:
            from channels.discord.channel import DiscordChannel  # discord.py loads only here

            return DiscordChannel(runtime, discord, discord_token, schedules=schedules)

        factories.append(make_discord)
    if cfg.http.enabled:
        credentials = cfg.http.credentials(source=source)
        factories.append(lambda runtime, schedules: HttpChannel(
            runtime, cfg.http, credentials, routes=routes,
            statuses=lambda: [(c.name, c.status()) for c in newest(made_all)],
            rules=lambda: rights_blocks(cfg), schedules=schedules, openai=cfg.openai_api))

    def keep(make: ChannelFactory) -> ChannelFactory:
        def made(runtime: Runtime, schedules: Scheduler | None) -> Channel:
            channel = make(runtime, schedules)
            made_all.append(channel)
            return channel
        return made

    return [keep(make) for make in factories]


def newest(channels: list[Channel]) -> list[Channel]:
    """The channel made last of each name (a start begun again made them anew)."""
    return list({c.name: c for c in channels}.values())
