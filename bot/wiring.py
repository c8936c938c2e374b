"""The channels the config enables, each in two steps: what it posts through and fetches
with, made before the runtime (which is built with them), then the channel itself over the
runtime when `maiden run` starts it (after recovery), with the schedules it fires and the
knowledge indexer (the console shows how its passes stand); settings that cannot work fail
before the store opens. A channel that can tell a person's time zone lends it to the
schedules' book as it is made."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels import Channel
from channels.discord import DiscordConfig
from channels.http import HttpChannel
from channels.slack import SlackConfig, SlackSecrets
from runtime import Deliverer, FileFetcher, Indexer, Records, Runtime, ScheduleService
from schedules import Scheduler

from .config import LoadedConfig
from .rights import rights_blocks

__all__ = ["ChannelFactory", "Prepared", "make_channels"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One configured channel before the runtime: its ``deliverer`` and ``fetcher`` (the
    runtime is built with them, under ``name``), and how the channel is made over it (with
    the schedules the process fires and its knowledge indexer, None for none)."""

    name: str
    deliverer: Deliverer | None
    fetcher: FileFetcher | None
    make: Callable[[Runtime, ScheduleService | None, Indexer | None], Channel]


ChannelFactory = Callable[[Records], Prepared]
"""A configured channel's first step, given the store's records as the runtime reads them
(a Slack reply sets its thread's session from them)."""


Routes = list[tuple[str, Callable[[], Callable[[Any], Awaitable[Any]]]]]
"""Paths the HTTP API serves for another channel (Slack's events in HTTP mode)."""


def make_channels(loaded: LoadedConfig) -> list[ChannelFactory]:
    """The channels the config enables, in the order they start: each a factory of its
    ``Prepared`` first step. Settings that cannot work (a missing token) fail here, before
    the store opens."""
    cfg = loaded.config
    source = str(loaded.path)
    factories: list[ChannelFactory] = []
    routes: Routes = []
    made_all: list[Channel] = []  # for the console: every channel's status
    slack = cfg.channels.slack
    if slack is not None and slack.enabled:
        factories.append(_slack(slack, slack.secrets(source=source), routes))
    discord = cfg.channels.discord
    if discord is not None and discord.enabled:
        factories.append(_discord(discord, discord.token(source=source)))
    if cfg.http.enabled:
        credentials = cfg.http.credentials(source=source)
        factories.append(lambda records: Prepared(
            HttpChannel.name, None, None, lambda runtime, schedules, knowledge: HttpChannel(
                runtime, cfg.http, credentials, routes=routes,
                statuses=lambda: [(c.name, c.status()) for c in newest(made_all)],
                rules=lambda: rights_blocks(cfg), schedules=schedules, knowledge=knowledge,
                openai=cfg.openai_api)))
    return [_kept(prepare, made_all) for prepare in factories]


def _slack(slack: SlackConfig, secrets: SlackSecrets, routes: Routes) -> ChannelFactory:
    made: list[Any] = []

    def prepare_slack(records: Records) -> Prepared:
        from channels.slack.channel import SlackChannel, SlackOutbound  # slack-bolt: here

        outbound = SlackOutbound(slack, secrets, records)

        def make(runtime: Runtime, schedules: ScheduleService | None,
                 _knowledge: Indexer | None) -> Channel:
            channel = SlackChannel(runtime, outbound, schedules=schedules)
            if isinstance(schedules, Scheduler):  # "tomorrow at 9": where its asker is
                schedules.book.zones[channel.name] = channel.zones
            made.append(channel)
            return channel

        return Prepared(outbound.name, outbound.deliverer, outbound.fetcher, make)

    if slack.mode == "http":
        # Served by the HTTP API, which starts after Slack (so the endpoint exists): the
        # Slack channel made last, over this start's runtime (a start begun again after
        # a store error makes its channels anew; the first ones' runtime is shut down).
        routes.append(("/slack/events", lambda: made[-1].http_endpoint()))
    return prepare_slack


def _discord(discord: DiscordConfig, token: str) -> ChannelFactory:
    def prepare_discord(records: Records) -> Prepared:
        from channels.discord.channel import DiscordChannel, DiscordOutbound  # discord.py

        outbound = DiscordOutbound(discord, token)
        return Prepared(outbound.name, outbound.deliverer, outbound.fetcher,
                        lambda runtime, schedules, _: DiscordChannel(
                            runtime, outbound, schedules=schedules))

    return prepare_discord


def _kept(prepare: ChannelFactory, made_all: list[Channel]) -> ChannelFactory:
    """``prepare``, its channel added to ``made_all`` once made."""
    def prepared(records: Records) -> Prepared:
        first = prepare(records)

        def make(runtime: Runtime, schedules: ScheduleService | None,
                 knowledge: Indexer | None) -> Channel:
            channel = first.make(runtime, schedules, knowledge)
            made_all.append(channel)
            return channel

        return Prepared(first.name, first.deliverer, first.fetcher, make)
    return prepared


def newest(channels: list[Channel]) -> list[Channel]:
    """The channel made last of each name (a start begun again made them anew)."""
    return list({c.name: c for c in channels}.values())
