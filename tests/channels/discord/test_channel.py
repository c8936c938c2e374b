"""The Discord channel end to end: the real discord.py client (REST and gateway) against a
fake Discord on loopback, with ``api_url`` pointed at it (the gateway found from it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from channels.discord import DiscordConfig
from channels.discord.channel import DiscordChannel, DiscordOutbound
from runtime import (
    AgentConfig,
    EchoProvider,
    Provider,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    Tool,
    ToolRegistry,
    tool,
)
from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    HUMAN_ID,
    THREAD_ID,
    FakeDiscord,
    World,
    new_id,
)


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@dataclass
class Discord:
    fake: FakeDiscord
    runtime: Runtime
    channel: DiscordChannel

    def replies(self, channel: Any = GENERAL_ID) -> list[dict[str, Any]]:
        return [m for m in self.fake.messages(channel)
                if str(m["author"]["id"]) == str(BOT_ID)]


@asynccontextmanager
async def running(fake: FakeDiscord, db: Path, *, provider: Provider | None = None,
                  tools: tuple[Tool, ...] = (deploy,), agent: AgentConfig | None = None,
                  settings: RuntimeConfig | None = None, registry: ToolRegistry | None = None,
                  store_class: type[SQLiteStore] = SQLiteStore,
                  **overrides: Any) -> AsyncIterator[Discord]:
    fields: dict[str, Any] = {"api_url": fake.api_url, "file_hosts": [fake.cdn_url],
                              "allow_users": [str(HUMAN_ID)]}
    fields.update(overrides)
    async with store_class(db) as store:
        discord = DiscordOutbound(DiscordConfig(**fields), fake.token, guild_ready_timeout=0.05)
        runtime = Runtime(store, provider or EchoProvider(), registry or ToolRegistry(tools),
                          agent=agent,
                          settings=settings or RuntimeConfig(poll_interval_s=0.1),
                          deliverers={"discord": discord.deliverer},
                          fetchers={"discord": discord.fetcher})
        async with runtime:
            channel = DiscordChannel(runtime, discord)
            async with channel:
                # What the new session read back is taken first (catchup.py): a test's
                # faults and counts then start from there.
                if channel.holder is None:
                    await asyncio.wait_for(channel.inbound.caught_up.wait(), 10)
                yield Discord(fake, runtime, channel)
            await runtime.idle()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as started:
        yield started


@pytest.fixture
def discord_bot(
    fake: FakeDiscord, tmp_path: Path
) -> Callable[..., AbstractAsyncContextManager[Discord]]:
    def make(**options: Any) -> AbstractAsyncContextManager[Discord]:
        return running(fake, tmp_path / "maiden.db", **options)
    return make


async def settle(d: Discord, handled: int) -> None:
    """Until the channel has handled ``handled`` messages from people, and their runs ended."""
    await asyncio.wait_for(d.channel.wait_handled(handled), 10)
    await d.runtime.idle()


async def test_a_mention_is_answered_in_the_channel(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    async with discord_bot() as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hello",
                                       mentions=[BOT_ID])
        (reply,) = (await fake.wait_messages(GENERAL_ID, 2))[1:]
        await settle(d, 1)
        assert reply["content"] == "echo: hello"
        assert reply["message_reference"]["message_id"] == sent["id"]  # a reply to them
        (run,) = await d.runtime.records.runs()
        assert run.thread_id == f"discord:{fake.world.guild_of(GENERAL_ID)}:{GENERAL_ID}"
        assert run.idempotency_key == f"discord:{sent['id']}"
        assert fake.typing(GENERAL_ID)  # typing showed while it worked
        # Without a mention (respond_in = "mentions"), a channel message starts nothing.
        await fake.user_message(GENERAL_ID, HUMAN_ID, "just chatting")
        await settle(d, 2)
        assert len(d.replies()) == 1


async def test_dms_and_threads(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    async with discord_bot() as d:
        await fake.user_message(DM_ID, HUMAN_ID, "in private")
        await fake.wait_messages(DM_ID, 2)
        await fake.user_message(THREAD_ID, HUMAN_ID, f"<@{BOT_ID}> in a thread",
                                mentions=[BOT_ID])
        await fake.wait_messages(THREAD_ID, 2)
        await fake.user_message(THREAD_ID, HUMAN_ID, "and more, no mention")
        await fake.wait_messages(THREAD_ID, 4)
        await settle(d, 3)
        assert [m["content"] for m in d.replies(DM_ID)] == ["echo: in private"]
        assert [m["content"] for m in d.replies(THREAD_ID)] == [
            "echo: in a thread", "echo: and more, no mention"]
        ids = {t.id for t in await d.runtime.records.threads()}
        guild = fake.world.guild_of(THREAD_ID)
        assert ids == {f"discord:dm:{DM_ID}", f"discord:{guild}:{THREAD_ID}"}


async def test_a_duplicate_and_a_replay_after_resume_are_one_reply(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    async with discord_bot() as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> once",
                                       mentions=[BOT_ID])
        seq = await fake.dispatch("MESSAGE_CREATE", sent)  # the same event twice
        await fake.wait_messages(GENERAL_ID, 2)
        await fake.reconnect(replay_from=(seq or 2) - 2)  # RESUME replays both again
        await fake.resumed()
        await settle(d, 4)
        assert [m["content"] for m in d.replies()] == ["echo: once"]
        assert len(await d.runtime.records.runs()) == 1


async def test_a_too_long_message_is_told_the_limit_once(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    """It was dropped with a log line, and the person heard nothing."""
    async with discord_bot(agent=AgentConfig(max_message_chars=20)) as d:
        sent = await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> {'x' * 50}",
                                       mentions=[BOT_ID])
        seq = await fake.dispatch("MESSAGE_CREATE", sent)  # the same event twice
        await fake.wait_messages(GENERAL_ID, 2)
        await fake.reconnect(replay_from=(seq or 2) - 2)  # RESUME replays both again
        await fake.resumed()
        await settle(d, 4)
        (reply,) = d.replies()
        assert reply["content"] == (
            "Your message is too long: it has 50 characters and the limit is 20. Please "
            "shorten it or send it in parts.")
        assert reply["message_reference"]["message_id"] == sent["id"]
        (run,) = await d.runtime.records.runs()
        assert (run.state, run.reason) == ("failed", "message_too_long")


async def test_other_bots_and_strangers_are_ignored(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    stranger = new_id()
    fake.world.add_user(stranger, "eve")
    async with discord_bot() as d:
        await fake.user_message(GENERAL_ID, stranger, f"<@{BOT_ID}> let me in",
                                mentions=[BOT_ID])
        other_bot = new_id()
        fake.world.add_user(other_bot, "otherbot", bot=True)
        await fake.user_message(GENERAL_ID, other_bot, f"<@{BOT_ID}> beep", mentions=[BOT_ID])
        await settle(d, 2)
        assert d.replies() == [] and await d.runtime.records.runs() == []
    async with discord_bot(allow_users=[]) as closed:
        assert "serving nobody" in closed.channel.banner()
        assert closed.channel.status().startswith("connected as ")
    assert closed.channel.status() == "stopped"


async def test_a_long_reply_goes_in_three_messages_in_order(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 90 for i in range(11))
    assert 4_500 < len(text) <= 6_000
    async with discord_bot(provider=ScriptedProvider([{"text": text}])) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> a lot", mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 4)
        await settle(d, 1)
        posted = [m["content"] for m in d.replies()]
        assert len(posted) == 3 and all(len(p) <= 2_000 for p in posted)
        assert "\n\n".join(posted) == text


async def test_approval_by_an_approver_a_refusal_and_after_a_restart(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    approver = new_id()
    fake.world.add_user(approver, "lead")
    db = tmp_path / "maiden.db"
    async with running(fake, db, approvers=[str(approver)],
                       allow_users=[str(HUMAN_ID), str(approver)]) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f'<@{BOT_ID}> /tool deploy {{"env": "prod"}}',
                                mentions=[BOT_ID])
        (prompt,) = (await fake.wait_messages(GENERAL_ID, 2))[1:]
        await settle(d, 1)
        approve = prompt["components"][0]["components"][0]["custom_id"]
        asked = await fake.click(prompt, approve, user_id=HUMAN_ID)  # asked, but no approver
        await fake.until(lambda: bool(fake.shown(asked)), what="a refusal")
        (refusal,) = fake.shown(asked)  # a follow-up only they see; the prompt stands
        assert refusal["flags"] == 64 and "may not" in refusal["content"]
        assert fake.messages(GENERAL_ID)[1]["components"] == prompt["components"]
        (run,) = await d.runtime.records.pending_approvals()
    async with running(fake, db, approvers=[str(approver)],
                       allow_users=[str(HUMAN_ID), str(approver)]) as again:
        decided = await fake.click(prompt, approve, user_id=approver)  # from before the restart
        await fake.until(lambda: bool(fake.shown(decided)), what="the update")
        done = await again.runtime.wait(run.id)
        await again.runtime.idle()
        assert done.state == "completed" and done.reply == 'deploy returned "deployed to prod"'
        (update,) = fake.shown(decided)  # the prompt itself, its buttons gone
        assert update["id"] == prompt["id"] and update["components"] == []
        assert f"Approved by <@{approver}>" in update["content"]
        assert again.replies()[-1]["content"] == done.reply


async def test_stop_cancels_the_running_run(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]]
) -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with discord_bot(tools=(wait_forever,)) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> /tool wait_forever",
                                mentions=[BOT_ID])
        await asyncio.wait_for(started.wait(), 10)
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> stop", mentions=[BOT_ID])
        (run,) = await d.runtime.records.runs()
        ended = await d.runtime.wait(run.id)
        await settle(d, 2)
        assert ended.state == "cancelled" and ended.reason == f"cancelled by {HUMAN_ID}"


@pytest.mark.parametrize("fault", ["429", "drop"])
@pytest.mark.parametrize("stream", ["edit", "off"])
async def test_a_limited_or_lost_send_is_one_message(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]],
    fault: str, stream: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """A send Discord limits, or one whose answer is cut off (the connection dropped: the
    message was made), ends as one message; said in one line each, no traceback (chaos,
    seed 11010: 36 tracebacks of a dropped connection, an ``aiohttp.ClientError`` that is
    no ``OSError``)."""
    if fault == "429":
        fake.fail("POST /channels/{id}/messages", status=429, retry_after=0.1)
    else:
        fake.fail("POST /channels/{id}/messages", drop=True)
    async with discord_bot(stream=stream) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> careful",
                                mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 2)
        await settle(d, 1)
        await d.runtime.operator.flush_deliveries()
        assert [m["content"] for m in d.replies()] == ["echo: careful"]
    assert not [r for r in caplog.records if r.exc_info is not None]


async def test_a_typing_indicator_cut_off_is_one_line_and_the_answer_comes(
    fake: FakeDiscord, discord_bot: Callable[..., AbstractAsyncContextManager[Discord]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Discord cutting the typing call (down a moment: chaos, seed 10808 logged 17
    tracebacks of it) is said in one line; the run and its answer go on."""
    caplog.set_level(logging.INFO, "maiden.discord")
    fake.fail("POST /channels/{id}/typing", drop=True)
    async with discord_bot() as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hello", mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 2)
        await settle(d, 1)
        assert [m["content"] for m in d.replies()] == ["echo: hello"]
    assert any(c.dropped for c in fake.calls("POST /channels/{id}/typing"))
    assert [r.msg for r in caplog.records if "typing" in r.getMessage()] == [
        "discord: no typing indicator: %s"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_without_the_message_content_intent_it_says_so(tmp_path: Path) -> None:
    from runtime import MaidenError

    async with FakeDiscord(World(privileged=0)) as fake:
        with pytest.raises(MaidenError, match="message-content intent"):
            async with running(fake, tmp_path / "m.db"):
                pass


async def test_one_gateway_connection_among_replicas(fake: FakeDiscord, tmp_path: Path) -> None:
    """Two replicas on one store: only the lease holder connects (one answer per message);
    when it stops, the one standing by takes over."""
    db = tmp_path / "maiden.db"
    async with running(fake, db) as first, running(fake, db) as second:
        assert first.channel.holder is None
        assert second.channel.holder is not None
        assert second.channel.status().startswith("standing by: process ")
        assert "standing by" in second.channel.banner()
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> one",
                                mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 2)
        await settle(first, 1)
        assert second.channel.handled == 0
        await first.channel.__aexit__(None, None, None)  # the holder stops
        await asyncio.wait_for(second.channel.client.ready.wait(), 10)
        assert second.channel.holder is None
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> two",
                                mentions=[BOT_ID])
        await fake.wait_messages(GENERAL_ID, 4)
        await settle(second, 1)
        assert [m["content"] for m in first.replies()] == ["echo: one", "echo: two"]

