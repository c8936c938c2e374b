"""The Slack channel end to end: the real slack-bolt app and slack-sdk client against a fake
Slack on loopback (Web API + Socket Mode, or signed Events API requests over HTTP)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from channels.http import HttpChannel, HttpConfig
from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from channels.slack.deliverer import EVENT_TYPE
from runtime import (
    AgentConfig,
    EchoProvider,
    Provider,
    Records,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    Tool,
    ToolRegistry,
    tool,
)
from tests.fakes.site import free_port
from tests.fakes.slack import (
    BOT_USER,
    FakeSlack,
    block_actions_payload,
    sign,
    signed_event,
    signed_interaction,
)

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
C = "C0GENERAL01"
D = "D0DIRECT001"


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@dataclass
class Slack:
    fake: FakeSlack
    runtime: Runtime
    channel: SlackChannel

    def replies(self, channel: str = C) -> list[dict[str, Any]]:
        """What the bot posted in ``channel``."""
        return [m for m in self.fake.messages(channel) if m.get("user") == BOT_USER]


def config(fake: FakeSlack, **overrides: Any) -> SlackConfig:
    fields: dict[str, Any] = {"api_url": fake.api_url, "file_hosts": [fake.base_url],
                              "allow_users": ["U1", "U2"]}
    fields.update(overrides)
    return SlackConfig(**fields)


def secrets(fake: FakeSlack) -> SlackSecrets:
    return SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                        signing_secret=SECRET)


@asynccontextmanager
async def running(
    fake: FakeSlack, db: Path, *, provider: Provider | None = None,
    tools: tuple[Tool, ...] = (deploy,), agent: AgentConfig | None = None,
    registry: ToolRegistry | None = None, store_class: type[SQLiteStore] = SQLiteStore,
    **overrides: Any,
) -> AsyncIterator[Slack]:
    """A runtime on ``db`` with the Slack channel started against ``fake`` (Socket Mode)."""
    async with store_class(db) as store:
        slack = SlackOutbound(config(fake, **overrides), secrets(fake), Records(store),
                              pace_s=0)
        runtime = Runtime(store, provider or EchoProvider(), registry or ToolRegistry(tools),
                          agent=agent or AgentConfig(),
                          settings=RuntimeConfig(poll_interval_s=0.1),
                          deliverers={"slack": slack.deliverer},
                          fetchers={"slack": slack.fetcher})
        async with runtime:
            channel = SlackChannel(runtime, slack)
            async with channel:
                await fake.wait_connected()
                yield Slack(fake, runtime, channel)
            await runtime.idle()


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    """Slack for an app not declared as an agent: the thread's status shows the work (agent
    sessions: test_sessions.py)."""
    async with FakeSlack(agent=False) as started:
        yield started


@pytest.fixture
def slack(fake: FakeSlack, tmp_path: Path) -> Callable[..., AbstractAsyncContextManager[Slack]]:
    def make(**options: Any) -> AbstractAsyncContextManager[Slack]:
        return running(fake, tmp_path / "maiden.db", **options)
    return make


async def test_a_mention_is_answered_in_its_thread(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack() as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> hello there", mention=True)
        envelope = await fake.socket_event(sent)
        await fake.acked(envelope)
        await fake.wait_messages(C, 2)
        await s.runtime.idle()
        (reply,) = s.replies()
        root = sent["event"]["ts"]
        assert reply["thread_ts"] == root and reply["text"] == "echo: hello there"
        assert reply["metadata"]["event_type"] == EVENT_TYPE
        runs = await s.runtime.records.runs(thread_id=f"slack:{fake.workspace.team_id}:{C}:{root}")
        assert [r.idempotency_key for r in runs] == [f"slack:{fake.workspace.team_id}:{C}:"
                                                     f"{root}"]
        assert runs[0].reply == "echo: hello there"
        # The key in the message's metadata is the outbox record's.
        key = reply["metadata"]["event_payload"]["key"]
        assert [d.key for d in await _deliveries(s)] == [key]

        # A reply in that thread goes on without a mention.
        follow = fake.user_event(C, "U1", "and then?", thread_ts=root)
        await fake.acked(await fake.socket_event(follow))
        await fake.wait_messages(C, 4)
        await s.runtime.idle()
        assert [r["text"] for r in s.replies()] == ["echo: hello there", "echo: and then?"]
        # A channel message that is not for the bot starts nothing.
        await fake.acked(await fake.socket_event(fake.user_event(C, "U1", "lunch?")))
        await s.runtime.idle()
        assert len(s.replies()) == 2
        # While each run worked, the thread showed a status, cleared at the end.
        await fake.until(lambda: len(fake.statuses()) == 4, what="statuses cleared")
        assert [st["status"] for st in fake.statuses()] == ["is working on it…", "",
                                                           "is working on it…", ""]


async def test_without_the_assistant_feature_a_reaction_shows_the_work(
    tmp_path: Path,
) -> None:
    async with FakeSlack(assistant=False) as fake, running(fake, tmp_path / "m.db") as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> hello", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        await fake.until(lambda: len(fake.calls("reactions.remove")) == 1,
                         what="the reaction removed")
        (added,) = fake.calls("reactions.add")
        assert added["timestamp"] == sent["event"]["ts"]
        (message,) = [m for m in fake.messages(C) if m["ts"] == sent["event"]["ts"]]
        assert not message.get("reactions")


async def test_a_dm_is_answered_at_top_level(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack() as s:
        for text in ("one", "two"):
            event = fake.user_event(D, "U1", text, channel_type="im")
            await fake.acked(await fake.socket_event(event))
            await s.runtime.idle()
        replies = s.replies(D)
        assert [r["text"] for r in replies] == ["echo: one", "echo: two"]
        assert all("thread_ts" not in r for r in replies)
        (thread,) = await s.runtime.records.threads()
        assert thread.id == f"slack:{fake.workspace.team_id}:{D}" and thread.runs == 2


async def test_the_same_message_four_times_and_twice_over_is_one_reply(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack() as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> once", mention=True)
        first = await fake.socket_event(sent)
        await fake.acked(first)
        for _ in range(3):  # Slack's retries (retry_attempt 1..3)
            await fake.acked(await fake.socket_redeliver(first))
        # ... and the same message as message.channels, with its own event id.
        as_message = dict(sent["event"], type="message", channel_type="channel")
        await fake.acked(await fake.socket_event(as_message))
        await s.runtime.idle()
        assert [r["text"] for r in s.replies()] == ["echo: once"]
        assert len(await s.runtime.records.runs()) == 1


async def test_a_retry_after_a_restart_is_one_reply(fake: FakeSlack, tmp_path: Path) -> None:
    db = tmp_path / "maiden.db"
    sent = fake.user_event(C, "U1", f"<@{BOT_USER}> survive", mention=True)
    async with running(fake, db) as s:
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
    async with running(fake, db) as again:  # a new process; Slack retries the event
        await fake.acked(await fake.socket_event(sent, retry_attempt=1,
                                                 retry_reason="timeout"))
        await again.runtime.idle()
        assert [r["text"] for r in again.replies()] == ["echo: survive"]


async def test_who_may_talk(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack() as s:
        for _ in range(2):
            event = fake.user_event(C, "U9", f"<@{BOT_USER}> let me in", mention=True)
            await fake.acked(await fake.socket_event(event))
        await s.runtime.idle()
        assert s.replies() == [] and await s.runtime.records.runs() == []
        (notice,) = fake.ephemerals(C)  # one short notice, only to them
        assert notice["user"] == "U9" and "may not" in notice["text"]
    async with slack(allow_users=[]) as closed:  # fail closed: nobody listed, not open
        event = fake.user_event(C, "U1", f"<@{BOT_USER}> hi", mention=True)
        await fake.acked(await fake.socket_event(event))
        await closed.runtime.idle()
        assert await closed.runtime.records.runs() == []
        assert "serving nobody" in closed.channel.banner()
        assert closed.channel.status().startswith("connected (Socket Mode")
    assert closed.channel.status() == "stopped"


async def test_approval_by_an_approver_and_a_refusal_for_anyone_else(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack(approvers=["U2"]) as s:
        sent = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "prod"}}',
                               mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (prompt,) = s.replies()
        assert prompt["blocks"][1]["type"] == "actions" and "deploy" in prompt["text"]
        approve = prompt["blocks"][1]["elements"][0]
        (run,) = await s.runtime.records.pending_approvals(channel="slack")

        click = block_actions_payload("U1", C, prompt["ts"], approve["action_id"],
                                      approve["value"], message=prompt)
        await fake.acked(await fake.socket_interactive(click))  # U1 asked, but is no approver
        assert (await s.runtime.records.get_run(run.id)).state == "awaiting_approval"
        assert any(e["user"] == "U1" and "may not" in e["text"] for e in fake.ephemerals(C))

        click = block_actions_payload("U2", C, prompt["ts"], approve["action_id"],
                                      approve["value"], message=prompt)
        await fake.acked(await fake.socket_interactive(click))
        done = await s.runtime.wait(run.id)
        await s.runtime.idle()
        assert done.state == "completed" and done.reply == 'deploy returned "deployed to prod"'
        updated = next(m for m in fake.messages(C) if m["ts"] == prompt["ts"])
        assert "Approved by <@U2>" in str(updated["blocks"])
        assert [r["text"] for r in s.replies()][-1] == done.reply


async def test_buttons_posted_before_a_restart_still_work(
    fake: FakeSlack, tmp_path: Path
) -> None:
    db = tmp_path / "maiden.db"
    async with running(fake, db) as s:
        sent = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "dev"}}',
                               mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (prompt,) = s.replies()
    async with running(fake, db) as again:
        deny = prompt["blocks"][1]["elements"][1]
        click = block_actions_payload("U1", C, prompt["ts"], deny["action_id"],
                                      deny["value"], message=prompt)
        await fake.acked(await fake.socket_interactive(click))
        await again.runtime.idle()
        (run,) = await again.runtime.records.runs()
        assert run.state == "completed" and [d.approve for d in run.decisions] == [False]


async def test_stop_cancels_the_running_run(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    import asyncio

    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with slack(tools=(wait_forever,)) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> /tool wait_forever", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await asyncio.wait_for(started.wait(), 10)
        stop = fake.user_event(C, "U1", "stop", thread_ts=sent["event"]["ts"])
        await fake.acked(await fake.socket_event(stop))
        (run,) = await s.runtime.records.runs()
        ended = await s.runtime.wait(run.id)
        await s.runtime.idle()
        assert ended.state == "cancelled" and ended.reason == "cancelled by U1"
        assert "Stopped" in s.replies()[-1]["text"]


@pytest.mark.parametrize("fault", ["drop", "429"])
async def test_a_lost_or_limited_post_is_one_message(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]], fault: str
) -> None:
    if fault == "drop":
        fake.fail("chat.postMessage", drop=True)  # posted, but the answer never came
    else:
        fake.fail("chat.postMessage", status=429, retry_after=1)
    async with slack() as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> careful", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        await s.runtime.operator.flush_deliveries()  # what a serving runtime does every few seconds
        assert [r["text"] for r in s.replies()] == ["echo: careful"]
        (record,) = await _deliveries(s)
        assert record.remote_id == s.replies()[0]["ts"]


async def test_a_long_reply_is_split_in_order(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    text = "\n\n".join(f"Part {i}: " + "word " * 200 for i in range(12))
    assert len(text) > 12_000
    async with slack(provider=ScriptedProvider([{"text": text}])) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> write a lot", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        posted = [r["text"] for r in s.replies()]
        assert len(posted) >= 4 and all(len(p) <= 3_900 for p in posted)
        assert "\n\n".join(posted) == text

TOO_LONG = ("Your message is too long: it has 50 characters and the limit is 20. Please "
            "shorten it or send it in parts.")


async def test_a_too_long_message_is_acked_and_told_the_limit_once(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]]
) -> None:
    async with slack(agent=AgentConfig(max_message_chars=20)) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> {'x' * 50}", mention=True)
        first = await fake.socket_event(sent)
        await fake.acked(first)
        for _ in range(3):  # Slack's retries
            await fake.acked(await fake.socket_redeliver(first))
        await s.runtime.idle()
        (reply,) = s.replies()
        assert reply["text"] == TOO_LONG and reply["thread_ts"] == sent["event"]["ts"]
        (run,) = await s.runtime.records.runs()
        assert (run.state, run.reason) == ("failed", "message_too_long")
        # The model never saw it, and the thread's history does not hold it.
        assert await s.runtime.records.entries(run.thread_id) == []
        # A message that fits, in the same thread, is answered as usual.
        follow = fake.user_event(C, "U1", "short", thread_ts=sent["event"]["ts"])
        await fake.acked(await fake.socket_event(follow))
        await s.runtime.idle()
        assert [r["text"] for r in s.replies()] == [TOO_LONG, "echo: short"]


# -- the Events API over HTTP ----------------------------------------------------------------


async def test_http_mode_checks_signatures(fake: FakeSlack, tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        slack = SlackOutbound(config(fake, mode="http"), secrets(fake), Records(store),
                              pace_s=0)
        rt = Runtime(store, EchoProvider(), ToolRegistry([deploy]),
                     settings=RuntimeConfig(poll_interval_s=0.1),
                     deliverers={"slack": slack.deliverer})
        async with rt, SlackChannel(rt, slack) as channel:
            http = HttpChannel(rt, HttpConfig(port=0), None,
                               routes=[("/slack/events", channel.http_endpoint)])
            async with http, httpx.AsyncClient(base_url=http.url) as client:
                sent = fake.user_event(C, "U1", f"<@{BOT_USER}> over http", mention=True)
                body, headers = signed_event(sent, SECRET)
                bad = dict(headers, **{"X-Slack-Signature": "v0=" + "0" * 64})
                stale_body, stale = signed_event(sent, SECRET, ts=1_000_000)
                unsigned = {"Content-Type": "application/json"}
                for wrong in (bad, stale, unsigned):
                    refused = await client.post("/slack/events", content=stale_body
                                                if wrong is stale else body, headers=wrong)
                    assert refused.status_code == 401
                assert await rt.records.runs() == []
                for retry in (None, 1, 2):  # the first delivery and Slack's retries
                    body, headers = signed_event(sent, SECRET, retry_num=retry)
                    ok = await client.post("/slack/events", content=body, headers=headers)
                    assert ok.status_code == 200
                await rt.idle()
                assert [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER] \
                    == ["echo: over http"]

                # Buttons come to the same endpoint, signed and form-encoded.
                ask = fake.user_event(C, "U1", f'<@{BOT_USER}> /tool deploy {{"env": "qa"}}',
                                      mention=True)
                body, headers = signed_event(ask, SECRET)
                assert (await client.post("/slack/events", content=body,
                                          headers=headers)).status_code == 200
                await rt.idle()
                prompt = [m for m in fake.messages(C) if m.get("user") == BOT_USER][-1]
                button = prompt["blocks"][1]["elements"][0]
                click = block_actions_payload("U1", C, prompt["ts"], button["action_id"],
                                              button["value"], message=prompt)
                body, headers = signed_interaction(click, SECRET)
                assert (await client.post("/slack/events", content=body,
                                          headers=headers)).status_code == 200
                await rt.idle()
                assert await rt.records.pending_approvals() == []  # decided
                last = [m for m in fake.messages(C) if m.get("user") == BOT_USER][-1]
                assert last["text"] == 'deploy returned "deployed to qa"'


async def test_http_mode_takes_a_message_while_the_web_api_is_not_reached_yet(
        fake: FakeSlack, tmp_path: Path) -> None:
    """Who the bot is comes with the event: the message is stored and answered, and the
    answer waits in the outbox (it was a 500 for each of Slack's tries, then lost)."""
    async with over_http(fake, tmp_path / "maiden.db",
                         api_url=f"http://127.0.0.1:{free_port()}/api/") as (rt, client):
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> while down", mention=True)
        for retry in (None, 1):  # the first delivery and a retry of Slack's
            body, headers = signed_event(sent, SECRET, retry_num=retry)
            ok = await client.post("/slack/events", content=body, headers=headers)
            assert ok.status_code == 200
        await rt.idle()
        (run,) = await rt.records.runs()
        assert run.state is RunState.COMPLETED and run.reply == "echo: while down"
        (reply,) = [d for d in await rt.records.deliveries(run_id=run.id) if d.kind == "reply"]
        assert reply.remote_id is None  # waiting for Slack, not lost


@asynccontextmanager
async def over_http(fake: FakeSlack, db: Path, agent: AgentConfig | None = None,
                    **overrides: Any) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """The Slack channel in ``mode = "http"`` behind the HTTP API, and a client for it
    (``overrides``: of the channel's config)."""
    async with SQLiteStore(db) as store:
        slack = SlackOutbound(config(fake, mode="http", **overrides), secrets(fake),
                              Records(store), pace_s=0)
        rt = Runtime(store, EchoProvider(), ToolRegistry([deploy]), agent=agent,
                     settings=RuntimeConfig(poll_interval_s=0.1),
                     deliverers={"slack": slack.deliverer})
        async with rt, SlackChannel(rt, slack) as channel:
            http = HttpChannel(rt, HttpConfig(port=0), None,
                               routes=[("/slack/events", channel.http_endpoint)])
            async with http, httpx.AsyncClient(base_url=http.url) as client:
                yield rt, client


async def test_http_mode_acks_a_too_long_message_and_tells_the_limit_once(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """It was a 500 for each of Slack's four tries, and nobody was told."""
    async with over_http(fake, tmp_path / "m.db", AgentConfig(max_message_chars=20)) \
            as (rt, client):
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> {'x' * 50}", mention=True)
        for retry in (None, 1, 2, 3):
            body, headers = signed_event(sent, SECRET, retry_num=retry)
            assert (await client.post("/slack/events", content=body,
                                      headers=headers)).status_code == 200
        await rt.idle()
        assert [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER] \
            == [TOO_LONG]


async def test_http_mode_a_signed_body_that_is_not_json_is_a_400(
    fake: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with over_http(fake, tmp_path / "m.db") as (rt, client):
        caplog.clear()
        for junk, kind in ((b"{not json", "application/json"),
                           (b"[1, 2]", "application/json"),
                           (b"payload=%7Bnope", "application/x-www-form-urlencoded")):
            stamp = int(time.time())
            headers = {"Content-Type": kind, "X-Slack-Request-Timestamp": str(stamp),
                       "X-Slack-Signature": sign(junk, SECRET, stamp)}
            caplog.clear()
            with caplog.at_level(logging.INFO):
                answer = await client.post("/slack/events", content=junk, headers=headers)
            assert answer.status_code == 400, (junk, answer.text)
            mine = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(mine) == 1 and "not JSON" in mine[0].getMessage(), mine
            assert not any(r.exc_info for r in caplog.records)
        # Unsigned junk is still refused for its signature first.
        refused = await client.post("/slack/events", content=b"{not json",
                                    headers={"Content-Type": "application/json"})
        assert refused.status_code == 401
        assert await rt.records.runs() == []


async def _deliveries(s: Slack) -> list[Any]:
    """The outbox records of the runtime's runs (through its public reads)."""
    from runtime import ReplyDelivery

    out: list[Any] = []
    for run in await s.runtime.records.runs():
        out.extend(d for d in await s.runtime.records.deliveries(run_id=run.id)
                   if isinstance(d, ReplyDelivery))
    return out


async def test_an_event_while_shutting_down_is_not_acknowledged(
    fake: FakeSlack, slack: Callable[..., AbstractAsyncContextManager[Slack]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing was stored, so no ack: Slack sends the event again, to the next process.
    Said in one line, no traceback (bolt's own handler logged one for each event the store
    could not take: chaos, seed 10808, 191 of them)."""
    caplog.set_level(logging.INFO, "maiden.slack")
    async with slack() as s:
        await s.runtime.close()
        late = fake.user_event(C, "U1", f"<@{BOT_USER}> late", mention=True)
        envelope = await fake.socket_event(late)
        with pytest.raises(TimeoutError):  # a bounded wait for an ack that must not come
            await fake.acked(envelope, timeout=1)
        assert await s.runtime.records.runs() == []
    (said,) = [r for r in caplog.records if "not taken" in r.getMessage()]
    assert said.levelno == logging.WARNING and said.exc_info is None
    assert "shutting down" in said.getMessage()
    assert not [r for r in caplog.records if r.exc_info is not None]
