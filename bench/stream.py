"""Workload 11: live replies. How soon a person sees the answer start, and what it costs.

A scripted model writes about 500 tokens over about 2 s (two turns of 50 pieces, a tool
call between them) to a mention, through the real Slack and Discord channels against
the fakes of the tests. Measured per reply: the time from the model's first token to
the first visible text of the reply in the channel (the fake sees it), and the Web API
calls the reply took. Baseline: the same with ``stream = "off"``, whose first visible
text is the finished reply. Then the streamed case again with the runtime's lock held by
another run when each mention comes (a run of another thread, from the terminal, whose
model writes for ``BLOCK_S``): the mention's run waits for the lock, then streams; measured
as before, and from the mention to the first visible text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import (
    ModelRequest,
    ModelResponse,
    Records,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    UserMessage,
    tool,
)

from .thread import remove_db

__all__ = ["StreamResult", "run_stream"]

_PIECE = "word " * 4  # about 5 tokens


SCRIPT: list[dict[str, Any]] = [
    {"text": "Let me look. " + _PIECE * 50, "chunks": 50, "chunk_delay_s": 0.02,
     "tool_calls": [{"name": "lookup", "arguments": {"service": "api"}}]},
    {"text": _PIECE * 50, "chunks": 50, "chunk_delay_s": 0.02},
]
"""Every reply plays these two turns (in Discord a channel is one thread: the script is
repeated once per reply)."""

BLOCK_S = 0.3
"""How long the run holding the lock writes before it ends."""
BLOCKER: dict[str, Any] = {"text": "busy " * 30, "chunks": 15, "chunk_delay_s": BLOCK_S / 15}
BLOCKED = "blocker"
"""The threads of the runs that hold the lock start so."""


@tool
def lookup(service: str) -> str:
    """Look a service up."""
    return f"{service}: green"


class _Timed:
    """The scripted model, noting when each reply's first token comes."""

    model = "scripted"

    def __init__(self, replies: int) -> None:
        self.inner = ScriptedProvider(SCRIPT * replies)
        self.blocker = ScriptedProvider([BLOCKER] * replies)
        self.first: list[float] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        if request.thread_id.startswith(BLOCKED):
            return await self.blocker.complete(request, on_text)
        opening = isinstance(request.entries[-1], UserMessage)  # a reply's first turn
        noted = False

        async def sink(delta: str) -> None:
            nonlocal noted
            if opening and not noted:
                noted = True
                self.first.append(time.perf_counter())
            if on_text is not None:
                await on_text(delta)

        return await self.inner.complete(request, sink)


@dataclass
class StreamResult:
    platform: str
    mode: str
    held: bool = False
    """The lock was held by another run when each mention came."""
    first_visible_ms: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    asked_to_visible_ms: list[float] = field(default_factory=list)
    """From the mention to the first visible text (the wait for the lock included)."""

    @staticmethod
    def percentile(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@asynccontextmanager
async def _runtime(db: Path, model: _Timed, outbound: Callable[[Records], Any]
                   ) -> AsyncIterator[tuple[Runtime, Any]]:
    """A runtime built with the deliverer of ``outbound`` (a channel's, made first), and it."""
    remove_db(db)
    async with SQLiteStore(db, synchronous="normal") as store:
        out = outbound(Records(store))
        async with Runtime(store, model, ToolRegistry([lookup]),
                           settings=RuntimeConfig(poll_interval_s=0.1),
                           deliverers={out.name: out.deliverer}) as rt:
            yield rt, out


async def _hold(rt: Runtime, i: int) -> None:
    """Have another thread's run take the lock and begin to write before going on."""
    async with rt.subscribe() as events:
        run = await rt.submit(f"{BLOCKED}-{i}", "keep busy")
        while True:
            event = await asyncio.wait_for(events.next(), 30)
            if event.run_id == run.id and event.kind == "text.delta":
                return


async def _slack(workdir: Path, replies: int, mode: str, held: bool = False) -> StreamResult:
    from channels.slack import SlackConfig, SlackSecrets
    from channels.slack.channel import SlackChannel, SlackOutbound
    from tests.fakes.slack import BOT_USER, FakeSlack

    result, model, channel_id = StreamResult("slack", mode, held), _Timed(replies), \
        "C0STREAM01"
    async with FakeSlack() as fake, _runtime(
            workdir / "stream-slack.db", model, lambda records: SlackOutbound(
                SlackConfig(api_url=fake.api_url, allow_users=["U1"], stream=mode),
                SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                             signing_secret="s" * 32), records, pace_s=0)) as (rt, slack), \
            SlackChannel(rt, slack):
        await fake.wait_connected()
        for i in range(replies):
            if held:
                await _hold(rt, i)
            before = len(fake.requests)
            asked = time.perf_counter()
            event = fake.user_event(channel_id, "U1", f"<@{BOT_USER}> go {i}", mention=True)
            await fake.acked(await fake.socket_event(event), timeout=30)
            root = event["event"]["ts"]

            def shown(root: str = root) -> bool:
                return any(m.get("user") == BOT_USER and m.get("thread_ts") == root
                           and m.get("text") for m in fake.messages(channel_id))

            await fake.until(shown, what="the reply's first text", timeout=30)
            seen = time.perf_counter()
            result.first_visible_ms.append((seen - model.first[i]) * 1000)
            result.asked_to_visible_ms.append((seen - asked) * 1000)
            await rt.idle()
            result.calls.append(sum(r.method.startswith("chat.")
                                    for r in fake.requests[before:]))
    return result


async def _discord(workdir: Path, replies: int, mode: str, held: bool = False
                   ) -> StreamResult:
    from channels.discord import DiscordConfig
    from channels.discord.channel import DiscordChannel, DiscordOutbound
    from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

    result, model = StreamResult("discord", mode, held), _Timed(replies)
    async with FakeDiscord() as fake, _runtime(
            workdir / "stream-discord.db", model, lambda records: DiscordOutbound(
                DiscordConfig(api_url=fake.api_url, allow_users=[str(HUMAN_ID)], stream=mode),
                fake.token, guild_ready_timeout=0.05)) as (rt, discord), \
            DiscordChannel(rt, discord) as channel:
        for i in range(replies):
            if held:
                await _hold(rt, i)
            before = len(fake.calls())
            asked = time.perf_counter()
            sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> go {i}",
                                           mentions=[BOT_ID])

            def shown(asked: str = str(sent["id"])) -> bool:
                return any(str(m["author"]["id"]) == str(BOT_ID) and m.get("content")
                           and (m.get("message_reference") or {}).get("message_id") == asked
                           for m in fake.messages(GENERAL_ID))

            await fake.until(shown, what="the reply's first text", timeout=30)
            seen = time.perf_counter()
            result.first_visible_ms.append((seen - model.first[i]) * 1000)
            result.asked_to_visible_ms.append((seen - asked) * 1000)
            await asyncio.wait_for(channel.wait_handled(i + 1), 30)
            await rt.idle()
            result.calls.append(sum("/messages" in c.path and c.method != "GET"
                                    for c in fake.calls()[before:]))
    return result


async def run_stream(workdir: Path, replies: int) -> list[StreamResult]:
    """Slack native and off, Discord edit and off, then the streamed ones with the lock
    held by another run: ``replies`` mentions each."""
    runs: list[tuple[Callable[..., Any], str, bool]] = [
        (_slack, "native", False), (_slack, "off", False), (_discord, "edit", False),
        (_discord, "off", False), (_slack, "native", True), (_discord, "edit", True)]
    return [await run(workdir, replies, mode, held) for run, mode, held in runs]
