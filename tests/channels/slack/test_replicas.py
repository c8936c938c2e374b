"""Slack across replicas: two runtimes, each on its own ``SQLiteStore`` of one database file
(as two ``maiden run`` processes would have), each with its own Slack channel, against one
fake Slack.

In Socket Mode each replica opens its own connection, and Slack may hand an event to either
of them, to both (an ack it did not see, then a retry on the other connection), or the same
message as two events to the two. In HTTP mode the load balancer may send a delivery and
its retry to different replicas. Whatever the spread: one run per message, by its key, one
reply in the right Slack thread, and a thread's messages answered in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from channels.http import HttpChannel, HttpConfig
from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import (
    AssistantTurn,
    EchoProvider,
    Records,
    ReplyDelivery,
    Run,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    Tool,
    ToolRegistry,
    UserMessage,
    tool,
)
from tests.fakes.slack import BOT_USER, FakeSlack, block_actions_payload, signed_event

pytestmark = pytest.mark.timeout(60)

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
C = "C0GENERAL01"
WAIT_S = 15.0
"""The deadline of each wait on the runtimes (the fake's own waits have theirs)."""
SETTINGS = RuntimeConfig(poll_interval_s=0.05)

JSON = dict[str, Any]


@dataclass
class Replica:
    """One ``maiden run``: its runtime and Slack channel, and how Slack reaches it."""

    runtime: Runtime
    channel: SlackChannel
    connection: int | None = None
    """Socket Mode: its connection's place among the fake's live ones, oldest first."""
    http: httpx.AsyncClient | None = None
    """HTTP mode: a client of its own HTTP API (the load balancer's way to it)."""


class Gate:
    """A tool call that holds its run until the test lets it go (or it is cancelled)."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    def tool(self) -> Tool:
        @tool
        async def hold() -> str:
            """Waits for the test."""
            self.calls += 1
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "held"

        return hold


HELD = 'hold returned "held"'


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@asynccontextmanager
async def replica(
    fake: FakeSlack, db: Path, *, mode: Literal["socket", "http"] = "socket",
    tools: Sequence[Tool] = (), clock: Callable[[], float] = time.time,
    stream: Literal["native", "edit", "off"] = "native",
) -> AsyncIterator[Replica]:
    """A replica on ``db``: its own store object, runtime and Slack channel, started;
    ``clock``: its machine's wall clock."""
    config = SlackConfig(api_url=fake.api_url, allow_users=["U1"], approvers=["U1"],
                         mode=mode, stream=stream)
    secrets = SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                           signing_secret=SECRET)
    async with SQLiteStore(db) as store:
        slack = SlackOutbound(config, secrets, Records(store), pace_s=0)
        runtime = Runtime(store, EchoProvider(), ToolRegistry(tools), settings=SETTINGS,
                          clock=clock, deliverers={"slack": slack.deliverer})
        async with runtime:
            async with SlackChannel(runtime, slack) as channel:
                if mode == "socket":
                    yield Replica(runtime, channel)
                else:
                    http = HttpChannel(runtime, HttpConfig(port=0), None,
                                       routes=[("/slack/events", channel.http_endpoint)])
                    async with http, httpx.AsyncClient(base_url=http.url) as client:
                        yield Replica(runtime, channel, http=client)
            await runtime.idle()


@asynccontextmanager
async def socket_replicas(fake: FakeSlack, db: Path, *, tools: Sequence[Tool] = (),
                          b_behind_s: float = 0.0) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas in Socket Mode, each connected: ``a`` first, so it has connection 0 and
    ``b`` connection 1 (the newest, where sends without ``to`` go). ``b_behind_s``: how far
    ``b``'s machine's clock is behind ``a``'s."""
    async with replica(fake, db, tools=tools) as a:
        await fake.wait_connected(1)
        async with replica(fake, db, tools=tools,
                           clock=lambda: time.time() - b_behind_s) as b:
            await fake.wait_connected(2)
            await fake.until(lambda: fake.socket.live == 2, what="both replicas connected")
            a.connection, b.connection = 0, 1
            yield a, b
            # No connection was replaced meanwhile: connection 0 was a's all along.
            assert fake.socket.opened == 2


@asynccontextmanager
async def http_replicas(fake: FakeSlack, db: Path
                        ) -> AsyncIterator[tuple[Replica, Replica]]:
    async with replica(fake, db, mode="http") as a, replica(fake, db, mode="http") as b:
        yield a, b


# -- what a test sends and waits for -----------------------------------------------------------


def mention(fake: FakeSlack, text: str) -> JSON:
    """A person mentions the bot in ``C`` (a new Slack thread): the event Slack sends."""
    return fake.user_event(C, "U1", f"<@{BOT_USER}> {text}", mention=True)


def in_thread(fake: FakeSlack, root: str, text: str) -> JSON:
    """A person replies in the Slack thread ``root``, without a mention."""
    return fake.user_event(C, "U1", text, thread_ts=root)


async def to(fake: FakeSlack, r: Replica, payload: JSON, **retry: Any) -> str:
    """Deliver ``payload`` on ``r``'s connection; return the envelope once ``r`` acked it
    (acked: the message is stored, whichever replica will run it)."""
    envelope = await fake.socket_event(payload, to=r.connection, **retry)
    await fake.acked(envelope)
    return envelope


async def post(r: Replica, payload: JSON, retry_num: int | None = None) -> None:
    """POST ``payload`` to ``r``'s /slack/events, signed as Slack signs it."""
    assert r.http is not None
    body, headers = signed_event(payload, SECRET, retry_num=retry_num)
    answer = await r.http.post("/slack/events", content=body, headers=headers)
    assert answer.status_code == 200, answer.text


def key_of(fake: FakeSlack, payload: JSON) -> str:
    event = payload["event"]
    return f"slack:{fake.workspace.team_id}:{event['channel']}:{event['ts']}"


def thread_of(fake: FakeSlack, root: str) -> str:
    return f"slack:{fake.workspace.team_id}:{C}:{root}"


def bot_posts(fake: FakeSlack) -> list[JSON]:
    """Everything the bot posted in ``C``, in any thread, oldest first."""
    return [m for m in fake.messages(C) if m.get("user") == BOT_USER]


def answers(fake: FakeSlack, root: str) -> list[str]:
    """The bot's messages in the Slack thread ``root``, oldest first."""
    return [m["text"] for m in bot_posts(fake) if m.get("thread_ts") == root]


async def settled(*replicas: Replica) -> None:
    """Wait until no replica has work left (each has posted what the runs it drove said)."""
    async with asyncio.timeout(WAIT_S):
        # Twice: a channel's follower (its status) may wake a replica's worker just after
        # that replica went idle.
        for _ in range(2):
            await asyncio.gather(*(r.runtime.idle() for r in replicas))


async def one_run(fake: FakeSlack, replicas: Sequence[Replica], payload: JSON) -> Run:
    """The single run that holds ``payload``'s message key, waited for until it ended and
    its reply was posted; every replica sees the same one."""
    key = key_of(fake, payload)
    found = {r.runtime.operator.instance_id: await r.runtime.records.run_for_key(key)
             for r in replicas}
    first = next(iter(found.values()))
    assert first is not None, f"no run for {key}"
    assert {r.id if r else None for r in found.values()} == {first.id}
    async with asyncio.timeout(WAIT_S):
        done = await replicas[0].runtime.wait(first.id)
    await settled(*replicas)
    assert done.state == "completed", (done.state, done.reason)
    assert done.owner in found  # driven by one of the replicas
    # Its message once in the thread, and its answer last: it was driven once.
    entries = [e for e in await replicas[0].runtime.records.entries(done.thread_id)
               if getattr(e, "run_id", None) == done.id]
    assert sum(isinstance(e, UserMessage) for e in entries) == 1
    last = entries[-1]
    assert isinstance(last, AssistantTurn) and not last.tool_calls and last.text == done.reply
    # One outbox record, posted once: its key is on the one message it was posted as.
    (record,) = [d for d in await replicas[0].runtime.records.deliveries(run_id=done.id)
                 if isinstance(d, ReplyDelivery)]
    assert record.remote_id is not None
    (posted,) = [m for m in bot_posts(fake)
                 if m["metadata"]["event_payload"]["key"] == record.key]
    assert posted["ts"] == record.remote_id
    return await replicas[0].runtime.records.get_run(done.id)


async def status_cleared(fake: FakeSlack, root: str) -> None:
    """The Slack thread shows no status at the end: each replica that showed one (both may,
    when both got the event while the run worked) took its own away (an app that is not an
    agent, ``FakeSlack(agent=False)``: the thread's status, not a session)."""

    def cleared() -> bool:
        shown = [s["status"] for s in fake.statuses() if s["thread_ts"] == root]
        return bool(shown) and shown[-1] == "" and shown.count("") * 2 == len(shown)

    await fake.until(cleared, what=f"the status of thread {root} cleared")


# -- Socket Mode -------------------------------------------------------------------------------


@pytest.mark.parametrize("twice", ["same event", "app_mention and message.channels"])
async def test_an_event_on_both_connections_is_one_run(
    tmp_path: Path, twice: str
) -> None:
    """Slack hands the message to both replicas at once: as the same envelope payload (one
    event_id) or as its two event types, one each; both ack, one run, one reply."""
    async with FakeSlack(agent=False) as fake, \
            socket_replicas(fake, tmp_path / "maiden.db") as (a, b):
        sent = mention(fake, "hello both")
        other = sent if twice == "same event" else fake.event_callback(
            dict(sent["event"], type="message", channel_type="channel"))
        envelopes = await asyncio.gather(fake.socket_event(sent, to=a.connection),
                                         fake.socket_event(other, to=b.connection))
        for envelope in envelopes:
            await fake.acked(envelope)
        run = await one_run(fake, (a, b), sent)
        root = sent["event"]["ts"]
        assert run.thread_id == thread_of(fake, root)
        assert answers(fake, root) == ["echo: hello both"]
        assert [r.id for r in await a.runtime.records.runs()] == [run.id]

        # A different message, to the other replica only, is its own run with its own reply.
        second = mention(fake, "and you")
        await to(fake, b, second)
        again = await one_run(fake, (a, b), second)
        assert again.id != run.id
        assert answers(fake, second["event"]["ts"]) == ["echo: and you"]
        assert [m["text"] for m in bot_posts(fake)] == ["echo: hello both", "echo: and you"]
        assert len(await b.runtime.records.runs()) == 2
        await status_cleared(fake, root)
        await status_cleared(fake, second["event"]["ts"])


async def test_a_retry_on_the_other_connection_is_one_run(tmp_path: Path) -> None:
    """Slack sends the event to one replica, then (its ack not seen in time) again to the
    other: while the run works there, and once more after it ended. One run, one tool call,
    one reply."""
    gate = Gate()
    async with FakeSlack(agent=False) as fake, \
            socket_replicas(fake, tmp_path / "maiden.db", tools=[gate.tool()]) as (a, b):
        sent = mention(fake, "/tool hold")
        first = await to(fake, a, sent)
        async with asyncio.timeout(WAIT_S):
            await gate.started.wait()
        retry = await fake.socket_redeliver(first, to=b.connection)  # retry_attempt 1
        await fake.acked(retry)
        (working,) = await b.runtime.records.runs()
        assert not working.terminal  # (its start may still be held in a's memory)
        gate.release.set()
        run = await one_run(fake, (a, b), sent)
        late = await fake.socket_redeliver(retry, to=b.connection)  # retry_attempt 2, late
        await fake.acked(late)
        await fake.acked(await fake.socket_redeliver(late, to=a.connection))  # and 3
        await settled(a, b)
        root = sent["event"]["ts"]
        assert answers(fake, root) == [HELD] and gate.calls == 1
        assert [r.id for r in await b.runtime.records.runs()] == [run.id]
        await status_cleared(fake, root)


async def test_a_threads_messages_spread_over_both_replicas_are_answered_in_order(
    tmp_path: Path,
) -> None:
    """A Slack thread's messages land on either replica: those that came while the thread
    was busy on one are queued behind its run and answered after it, in order; later ones
    are driven by whichever replica got them. Each is answered once."""
    gate = Gate()
    async with FakeSlack() as fake, \
            socket_replicas(fake, tmp_path / "maiden.db", tools=[gate.tool()]) as (a, b):
        root_event = mention(fake, "/tool hold")
        root = root_event["event"]["ts"]
        await to(fake, a, root_event)
        async with asyncio.timeout(WAIT_S):
            await gate.started.wait()  # a drives the thread's first run and holds it there
        sent = [root_event]
        for i, r in enumerate((b, a, b, a, b), 1):  # queued behind it, from both replicas
            sent.append(in_thread(fake, root, f"queued {i}"))
            await to(fake, r, sent[-1])
        gate.release.set()
        await settled(a, b)
        assert answers(fake, root) == [HELD] + [f"echo: queued {i}" for i in range(1, 6)]

        # With the thread idle, each message goes to one replica, which drives it.
        for i, r in enumerate((b, a, b, a), 1):
            sent.append(in_thread(fake, root, f"then {i}"))
            await to(fake, r, sent[-1])
            await one_run(fake, (a, b), sent[-1])
        expected = [HELD] + [f"echo: queued {i}" for i in range(1, 6)] + \
            [f"echo: then {i}" for i in range(1, 5)]
        assert answers(fake, root) == expected
        assert [m["text"] for m in bot_posts(fake)] == expected  # nothing anywhere else
        runs = await a.runtime.records.runs(thread_id=thread_of(fake, root))
        assert [r.idempotency_key for r in runs] == [key_of(fake, p) for p in sent]
        assert all(r.state == "completed" for r in runs)
        assert {r.owner for r in runs} == {a.runtime.operator.instance_id,
                                           b.runtime.operator.instance_id}
        assert gate.calls == 1


async def test_a_stop_or_a_click_at_the_other_replica_reaches_the_run(tmp_path: Path) -> None:
    """``stop`` and the Approve button may reach the replica that is not driving the run:
    the stop is handed to the one that is, whose tool stops where it runs; the click decides
    the paused run, which goes on and is answered once."""
    gate = Gate()
    async with FakeSlack() as fake, \
            socket_replicas(fake, tmp_path / "maiden.db", tools=[gate.tool(), deploy]) as (a, b):
        sent = mention(fake, "/tool hold")
        root = sent["event"]["ts"]
        await to(fake, a, sent)
        async with asyncio.timeout(WAIT_S):
            await gate.started.wait()
        (running,) = await a.runtime.records.runs()
        assert a.runtime.operator.holds(running.id) and not b.runtime.operator.holds(running.id)
        await to(fake, b, in_thread(fake, root, "stop"))
        async with asyncio.timeout(WAIT_S):
            ended = await b.runtime.wait(running.id)
        await settled(a, b)
        assert ended.state == "cancelled" and ended.reason == "cancelled by U1"
        assert gate.cancelled and gate.calls == 1  # stopped in a, where it ran
        (stopped,) = answers(fake, root)
        assert stopped.startswith("Stopped")

        ask = mention(fake, '/tool deploy {"env": "prod"}')
        await to(fake, a, ask)
        await settled(a, b)
        (prompt,) = [m for m in bot_posts(fake) if m.get("thread_ts") == ask["event"]["ts"]]
        approve = prompt["blocks"][1]["elements"][0]
        click = block_actions_payload("U1", C, prompt["ts"], approve["action_id"],
                                      approve["value"], message=prompt)
        await fake.acked(await fake.socket_interactive(click))  # on b's, the newest connection
        (paused,) = await b.runtime.records.runs(thread_id=thread_of(fake, ask["event"]["ts"]))
        async with asyncio.timeout(WAIT_S):
            done = await b.runtime.wait(paused.id)
        await settled(a, b)
        assert done.state == "completed" and done.reply == 'deploy returned "deployed to prod"'
        assert [d.approve for d in done.decisions] == [True]
        assert answers(fake, ask["event"]["ts"]) == ["Approved: deploy", done.reply]
        updated = next(m for m in fake.messages(C) if m["ts"] == prompt["ts"])
        assert "Approved by <@U1>" in str(updated["blocks"])


async def test_a_reply_whose_post_failed_is_posted_once(tmp_path: Path) -> None:
    """A reply whose post failed is retried by the replica holding its run, not by both at
    once; once that replica has stopped (a deploy), the other takes the retry over and, the
    post having gone through after all, finds it rather than posting it again."""
    db = tmp_path / "maiden.db"
    # The finished reply's post (a streamed reply's failures: tests/crash/test_crash_streams).
    async with FakeSlack() as fake, replica(fake, db, stream="off") as b:
        await fake.wait_connected(1)
        async with replica(fake, db, stream="off") as a:
            await fake.wait_connected(2)
            await fake.until(lambda: fake.socket.live == 2, what="both replicas connected")
            b.connection, a.connection = 0, 1
            fake.fail("chat.postMessage", error="fatal_error")  # not posted
            first = mention(fake, "careful")
            await to(fake, a, first)
            await settled(a, b)
            (failed,) = await b.runtime.records.deliveries(pending=True)
            assert failed.attempts_failed == 1
            # Both retry at once (what serving replicas do every few seconds).
            await asyncio.gather(a.runtime.operator.flush_deliveries(),
                                 b.runtime.operator.flush_deliveries())
            assert await b.runtime.records.deliveries(pending=True) == []
            assert answers(fake, first["event"]["ts"]) == ["echo: careful"]

            fake.fail("chat.postMessage", drop=True)  # posted, but the answer was lost
            second = mention(fake, "still careful")
            await to(fake, a, second)
            await settled(a, b)
            assert len(await b.runtime.records.deliveries(pending=True)) == 1
            await b.runtime.operator.flush_deliveries()  # a holds that run: b leaves it alone
            assert len(await b.runtime.records.deliveries(pending=True)) == 1
        await b.runtime.operator.flush_deliveries()  # a has stopped: b reconciles it
        assert await b.runtime.records.deliveries(pending=True) == []
        assert answers(fake, second["event"]["ts"]) == ["echo: still careful"]
        assert [m["text"] for m in bot_posts(fake)] == ["echo: careful", "echo: still careful"]
        assert fake.socket.opened == 2


# -- clocks that disagree ----------------------------------------------------------------


async def test_a_replica_whose_clock_is_behind_keeps_a_threads_order(tmp_path: Path) -> None:
    """Replicas on several machines do not share a clock: a message that reaches a replica
    whose clock is a few seconds behind is still answered after the one before it."""
    gate = Gate()
    async with FakeSlack() as fake, socket_replicas(fake, tmp_path / "maiden.db",
                                                    tools=[gate.tool()], b_behind_s=5) as (a, b):
        sent = mention(fake, "/tool hold")
        root = sent["event"]["ts"]
        await to(fake, a, sent)
        async with asyncio.timeout(WAIT_S):
            await gate.started.wait()
        await to(fake, a, in_thread(fake, root, "one"))
        await to(fake, b, in_thread(fake, root, "two"))
        gate.release.set()
        await settled(a, b)
        assert answers(fake, root) == [HELD, "echo: one", "echo: two"]


async def test_a_replica_whose_clock_is_behind_does_not_jump_an_approval(
    tmp_path: Path,
) -> None:
    """A message queued behind a run that waits for approval waits for it, whatever the
    clock of the replica it reached; the approved run's answer is about its own call."""
    async with FakeSlack() as fake, socket_replicas(fake, tmp_path / "maiden.db",
                                                    tools=[deploy], b_behind_s=5) as (a, b):
        ask = mention(fake, '/tool deploy {"env": "prod"}')
        root = ask["event"]["ts"]
        await to(fake, a, ask)
        await settled(a, b)
        (prompt,) = bot_posts(fake)
        await to(fake, b, in_thread(fake, root, "meanwhile"))
        await settled(a, b)
        approve = prompt["blocks"][1]["elements"][0]
        click = block_actions_payload("U1", C, prompt["ts"], approve["action_id"],
                                      approve["value"], message=prompt)
        await fake.acked(await fake.socket_interactive(click))
        runs = await a.runtime.records.runs(thread_id=thread_of(fake, root))
        async with asyncio.timeout(WAIT_S):
            for run in runs:
                await a.runtime.wait(run.id)
        await settled(a, b)
        assert answers(fake, root) == ["Approved: deploy", 'deploy returned "deployed to prod"',
                                       "echo: meanwhile"]


# -- notices ----------------------------------------------------------------------------


async def test_someone_not_allowed_gets_one_notice_across_replicas(tmp_path: Path) -> None:
    """An event from someone not allowed, delivered to one replica and retried on the
    other: no run, and (as docs/guides/slack.md promises) at most one ephemeral notice."""
    async with FakeSlack() as fake, socket_replicas(fake, tmp_path / "maiden.db") as (a, b):
        sent = fake.user_event(C, "U9", f"<@{BOT_USER}> let me in", mention=True)
        first = await to(fake, a, sent)
        await fake.acked(await fake.socket_redeliver(first, to=b.connection))
        await settled(a, b)
        assert await a.runtime.records.runs() == []
        assert len(fake.ephemerals(C)) == 1


# -- HTTP mode (the Events API behind a load balancer) -----------------------------------------


async def test_http_the_same_event_on_both_replicas_is_one_run(tmp_path: Path) -> None:
    """The load balancer sends Slack's delivery to one replica and, at the same time, its
    retry to the other; later retries go to either. One run, one reply; a thread's messages
    POSTed to alternating replicas are answered in order, once each."""
    async with FakeSlack() as fake, http_replicas(fake, tmp_path / "maiden.db") as (a, b):
        sent = mention(fake, "over http")
        await asyncio.gather(post(a, sent), post(b, sent, retry_num=1))
        run = await one_run(fake, (a, b), sent)
        for retry, r in ((2, a), (3, b)):
            await post(r, sent, retry_num=retry)
        await settled(a, b)
        root = sent["event"]["ts"]
        assert answers(fake, root) == ["echo: over http"]
        assert [r.id for r in await b.runtime.records.runs()] == [run.id]

        # The same message as message.channels, with its own event id, at the other one.
        as_message = fake.event_callback(dict(sent["event"], type="message",
                                              channel_type="channel"))
        await post(b, as_message)
        await settled(a, b)
        assert answers(fake, root) == ["echo: over http"]

        # The thread goes on, its messages spread over both replicas.
        for i, r in enumerate((b, a, b, a), 1):
            await post(r, in_thread(fake, root, f"next {i}"))
        await settled(a, b)
        runs = await a.runtime.records.runs(thread_id=thread_of(fake, root))
        async with asyncio.timeout(WAIT_S):
            for queued in runs:
                await a.runtime.wait(queued.id)
        await settled(a, b)
        assert answers(fake, root) == ["echo: over http"] + [f"echo: next {i}"
                                                            for i in range(1, 5)]
        assert len(bot_posts(fake)) == 5
        assert all(r.state == "completed" for r in await b.runtime.records.runs())
