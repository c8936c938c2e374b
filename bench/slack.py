"""Workload 6: how fast a Slack event is acknowledged while another run holds the lock.

Slack wants an ack within 3 seconds. maiden stores the message as a queued run before
it acks (one SQLite commit), and runs it after; so the ack must not wait for the
runtime lock. Here one run holds the global lock (a tool that waits) while a person
sends messages over Socket Mode through the real slack-bolt app to the fake Slack of
the tests; each event's time from being sent to being acked is measured. Baseline:
the same Socket Mode round trip to a bolt listener that stores nothing.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import (
    EchoProvider,
    Records,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from runtime.stores.sqlite import Synchronous
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack, slash_command

from .thread import remove_db

__all__ = ["SlackResult", "run_slack"]

C = "C0BENCH0001"


@dataclass
class SlackResult:
    events: int
    maiden_ms: list[float]
    baseline_ms: list[float]
    command_ms: list[float]
    """``/maiden status`` (it reads the store: the runs here), from sending to its ack."""

    @staticmethod
    def percentile(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _acks(fake: FakeSlack, events: int, text: str) -> list[float]:
    times = []
    for i in range(events):
        event = fake.user_event(C, "U1", f"<@{BOT_USER}> {text} {i}", mention=True)
        start = time.perf_counter()
        await fake.acked(await fake.socket_event(event), timeout=30)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def run_slack(workdir: Path, events: int, synchronous: Synchronous) -> SlackResult:
    path = workdir / "slack.db"
    remove_db(path)
    holding = asyncio.Event()
    release = asyncio.Event()

    @tool
    async def hold() -> str:
        """Keep the runtime lock."""
        holding.set()
        await release.wait()
        return "released"

    async with FakeSlack() as fake:
        config = SlackConfig(api_url=fake.api_url, open=True)
        secrets = SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                               signing_secret=None)
        async with SQLiteStore(path, synchronous=synchronous) as store:
            slack = SlackOutbound(config, secrets, Records(store), pace_s=0)
            rt = Runtime(store, EchoProvider(), ToolRegistry([hold]),
                         settings=RuntimeConfig(concurrency="global"),
                         deliverers={slack.name: slack.deliverer})  # (as `maiden run` does)
            async with rt, SlackChannel(rt, slack):
                await fake.wait_connected()
                blocker = await rt.submit("bench:blocker", "/tool hold")
                await asyncio.wait_for(holding.wait(), 30)
                maiden = await _acks(fake, events, "while the lock is held")
                commands = await _commands(fake, events)
                release.set()
                await rt.wait(blocker.id)
                await rt.idle()  # the mentions' replies, before the channel closes
            await rt.close(grace_s=0)
    return SlackResult(events=events, maiden_ms=maiden, baseline_ms=await _baseline(events),
                       command_ms=commands)


async def _commands(fake: FakeSlack, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await fake.acked(await fake.socket_command(slash_command(TEAM, C, "U1", "status")),
                         timeout=30)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def _baseline(events: int) -> list[float]:
    """The same round trip to a bolt app whose listener does nothing."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
    from slack_bolt.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    async with FakeSlack() as fake:
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        app = AsyncApp(client=client, process_before_response=True,
                       request_verification_enabled=False)

        async def nothing() -> None:
            return None

        app.event("app_mention")(nothing)
        app.event("message")(nothing)
        handler = AsyncSocketModeHandler(app, fake.app_token, web_client=client)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            await fake.wait_connected()
            return await _acks(fake, events, "nothing stored")
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
