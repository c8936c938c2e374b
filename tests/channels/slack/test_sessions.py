"""Slack's agent sessions and their stop button (docs/guides/slack.md, the agent session
and the stop button; ``channels.slack.sessions``): the real channel and bolt app against
the fake Slack, which keeps sessions as ``agents.sessions.setStatus`` documents them and sends
``agent_session_stopped`` when a person clicks stop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from channels.slack.sessions import session_of, thread_status
from runtime import (
    EchoProvider,
    ModelRequest,
    ModelResponse,
    Run,
    RunState,
    ScriptedProvider,
    tool,
)
from runtime.providers.base import TextSink
from runtime.stores.erasure import stop_scope
from tests.channels.slack.test_channel import C, Slack, running
from tests.channels.slack.test_clicks import approve_button, bot_messages, click, shell
from tests.fakes.slack import BOT_USER, FakeSlack

started = asyncio.Event()
released = asyncio.Event()


def hold() -> None:
    """``wait`` blocks from now until ``released`` (events are made per test: each test
    has its own loop)."""
    global started, released
    started, released = asyncio.Event(), asyncio.Event()


@tool
async def wait(what: str) -> str:
    """Wait for something (until the test lets it go)."""
    started.set()
    await released.wait()
    return f"{what}: done"


def statuses(fake: FakeSlack, thread_ts: str) -> list[str]:
    """The statuses the thread's session took (``agents.sessions.setStatus``, and a
    ``chat.stopStream``'s ``session_status``), one of each in a row (set twice is set)."""
    session = fake.sessions().get((C, thread_ts)) or {"statuses": []}
    return [s for i, s in enumerate(session["statuses"])
            if i == 0 or session["statuses"][i - 1] != s]


def without_processing(shown: list[str]) -> list[str]:
    return [s for s in shown if s != "processing"]


async def mention(fake: FakeSlack, text: str, user: str = "U1") -> dict[str, Any]:
    """``user`` mentions the bot in C; the message (its ``ts`` is the thread's)."""
    sent = fake.user_event(C, user, f"<@{BOT_USER}> {text}", mention=True)
    await fake.acked(await fake.socket_event(sent))
    return dict(sent["event"])


async def settled(s: Slack, fake: FakeSlack, thread_ts: str, last: str) -> None:
    await s.runtime.idle()
    await fake.until(lambda: statuses(fake, thread_ts)[-1:] == [last],
                     what=f"the session {last}")


async def test_a_run_is_a_session_processing_then_active_titled_by_its_message(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db") as s:
        asked = await mention(fake, "how did   the deploy go this morning, and what broke "
                                    "after it went out?")
        await settled(s, fake, asked["ts"], "active")
        first, *_ = [c for c in fake.calls("agents.sessions.setStatus")]
        # (``active`` at once if the run had ended before its session was first set)
        assert statuses(fake, asked["ts"]) in (["processing", "active"], ["active"])
        assert first["channel_id"] == C and first["initiator_user_id"] == "U1"
        assert first["title"].startswith("how did the deploy go") and len(first["title"]) <= 60
        # Sessions replace the assistant thread's status (kept only where Slack has none).
        assert not fake.calls("assistant.threads.setStatus")


async def test_a_run_waiting_for_an_approval_is_suspended_then_processing_again(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(shell,),
                                            approvers=["U1"]) as s:
        asked = await mention(fake, '/tool shell {"command": "ls"}')
        await settled(s, fake, asked["ts"], "suspended")
        prompt = bot_messages(fake, C)[-1]
        await click(fake, "U1", C, prompt, approve_button(prompt)["value"])
        await settled(s, fake, asked["ts"], "active")
        # (``processing`` first and again between, unless the run had moved on before its
        # session was set: each status is read from the store when it is set)
        assert without_processing(statuses(fake, asked["ts"])) == ["suspended", "active"]


async def test_the_stop_button_cancels_the_run_once_and_closes_the_session(
        tmp_path: Path) -> None:
    hold()
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(wait,),
                                            provider=EchoProvider()) as s:
        asked = await mention(fake, '/tool wait {"what": "the build"}')
        await asyncio.wait_for(started.wait(), 10)
        (run,) = await s.runtime.records.runs(thread_id=f"slack:{asked['team']}:{C}:"
                                                        f"{asked['ts']}")
        envelope = await fake.socket_event(fake.session_stopped(C, asked["ts"], "U1"))
        await fake.acked(envelope)
        await settled(s, fake, asked["ts"], "closed")
        ended = await s.runtime.records.get_run(run.id)
        assert ended.state == "cancelled" and ended.reason == "cancelled by U1"
        # Slack's retry of that event, a second click, and a click after the end: nothing.
        await fake.acked(await fake.socket_redeliver(envelope))
        await fake.acked(await fake.socket_event(fake.session_stopped(C, asked["ts"], "U1")))
        await s.runtime.idle()
        after = await s.runtime.records.get_run(run.id)
        assert after.version == ended.version and after.state == "cancelled"
        stopped = [m for m in bot_messages(fake, C) if m["text"].startswith("Stopped")]
        assert len(stopped) == 1
        released.set()


async def test_stop_written_in_the_thread_is_on_record_before_slack_gets_its_ack(
        tmp_path: Path) -> None:
    """Like the stop button, ``stop`` in the thread is written before the ack: a process
    killed right after still cancels the run at its next start, instead of answering it
    (across a real kill: tests/crash/test_crash_slack_stop.py; chaos/README.md, finding
    15). Slack's retry of the message stops nothing more."""
    hold()
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(wait,),
                                            provider=EchoProvider()) as s:
        asked = await mention(fake, '/tool wait {"what": "the build"}')
        await asyncio.wait_for(started.wait(), 10)
        (run,) = await s.runtime.records.runs(thread_id=f"slack:{asked['team']}:{C}:"
                                                        f"{asked['ts']}")
        stop = fake.user_event(C, "U1", f"<@{BOT_USER}> stop", thread_ts=asked["ts"],
                               mention=True)
        envelope = await fake.socket_event(stop)
        await fake.acked(envelope)
        assert [n.text for n in await s.runtime.records.notes(stop_scope(run.id))] == ["U1"]
        await settled(s, fake, asked["ts"], "closed")
        await fake.acked(await fake.socket_redeliver(envelope))
        await s.runtime.idle()
        ended = await s.runtime.records.get_run(run.id)
        assert ended.state == "cancelled" and ended.reason == "cancelled by U1"
        stopped = [m for m in bot_messages(fake, C) if m["text"].startswith("Stopped")]
        assert len(stopped) == 1
        released.set()


async def test_only_the_asker_or_an_operator_may_stop_a_run(tmp_path: Path) -> None:
    """U2 may talk in C but did not ask: their click stops nothing; U1 (who asked) may."""
    hold()
    rules = [{"place": C, "users": ["U1", "U2"], "rights": ["talk"]}]
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(wait,),
                                            allow_users=[], rules=rules) as s:
        asked = await mention(fake, '/tool wait {"what": "the build"}')
        await asyncio.wait_for(started.wait(), 10)
        thread = f"slack:{asked['team']}:{C}:{asked['ts']}"
        await fake.acked(await fake.socket_event(fake.session_stopped(C, asked["ts"], "U2")))
        (run,) = await s.runtime.records.runs(thread_id=thread)
        assert run.state == "awaiting_tool"
        assert statuses(fake, asked["ts"])[-1] == "processing"
        await fake.acked(await fake.socket_event(fake.session_stopped(C, asked["ts"], "U1")))
        await settled(s, fake, asked["ts"], "closed")
        assert (await s.runtime.records.get_run(run.id)).state == "cancelled"
        released.set()


async def test_without_sessions_the_assistant_status_is_shown(tmp_path: Path) -> None:
    """An app Slack keeps no sessions for (not declared an agent): the assistant thread's
    status, as before; said once, not asked again for the next run."""
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db") as s:
        fake.fail("agents.sessions.setStatus", error="not_allowed_token_type")
        asked = await mention(fake, "hello")
        await s.runtime.idle()
        await fake.until(lambda: len(fake.calls("assistant.threads.setStatus")) == 2,
                         what="the status set and cleared")
        await mention(fake, "again")
        await s.runtime.idle()
        assert len(fake.calls("agents.sessions.setStatus")) == 1
        assert asked["ts"]


class Streamed(ScriptedProvider):
    """The scripted model, the rest of its first answer held after the first piece until
    that answer's stream is open in Slack: it is streamed however loaded the machine (a
    run that ends before its stream opens is posted whole)."""

    fake: FakeSlack | None = None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        fake, sink = self.fake, on_text
        if fake is None or sink is None or self.calls:
            return await super().complete(request, on_text)
        said: list[str] = []

        async def held(piece: str) -> None:
            await sink(piece)
            said.append(piece)
            if len(said) == 1:
                await fake.until(lambda: bool(fake.calls("chat.startStream")),
                                 what="the answer's stream open")

        return await super().complete(request, held)


async def test_a_streamed_reply_says_the_sessions_status_as_its_stream_stops(
        tmp_path: Path) -> None:
    """``chat.stopStream`` sets the thread's session (Slack: ``active`` unless it says
    otherwise), so each stop says where the thread stands: a stream a long reply goes on
    from keeps it ``processing`` while the run works; the stream that ends the run gives
    its end; a stream a prompt ends, ``suspended``."""
    answer = ("All green. " * 500).strip()  # past one message: it goes on in a second
    script = Streamed([{"text": answer, "chunks": 4},
                       {"text": "Deploying now. ",
                        "tool_calls": [{"name": "deploy", "arguments": {"env": "a"}}]}])
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", provider=script,
                                            approvers=["U1"]) as s:
        script.fake = fake
        asked = await mention(fake, "how is it going?")
        await settled(s, fake, asked["ts"], "active")
        # (the first stop is ``active`` too if the run had ended by then: streams are paced)
        stops = [c.get("session_status") for c in fake.calls("chat.stopStream")]
        assert len(stops) == 2 and stops[0] in ("processing", "active") \
            and stops[1] == "active"
        assert without_processing(statuses(fake, asked["ts"])) == ["active"]
        assert len([m for m in bot_messages(fake, C) if m.get("thread_ts") == asked["ts"]]) == 2

        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> deploy it", thread_ts=asked["ts"],
                               mention=True)  # the next turn, in the same thread
        await fake.acked(await fake.socket_event(sent))
        await settled(s, fake, asked["ts"], "suspended")
        assert [c.get("session_status") for c in fake.calls("chat.stopStream")][2:] == [
            "suspended"]
        assert without_processing(statuses(fake, asked["ts"])) == ["active", "suspended"]


def test_a_threads_session_status_is_read_from_its_runs() -> None:
    def run(state: RunState) -> Run:
        return Run(id=f"r-{state}", thread_id="slack:T:C:1.2", text="hi", state=state)

    S = RunState
    assert thread_status([], None) is None
    assert thread_status([run(S.QUEUED)], None) == "processing"
    assert thread_status([run(S.AWAITING_APPROVAL), run(S.QUEUED)], None) == "suspended"
    assert thread_status([run(S.AWAITING_APPROVAL), run(S.RUNNING)], None) == "processing"
    assert thread_status([run(S.AWAITING_TOOL)], None) == "processing"
    assert thread_status([], run(S.COMPLETED)) == "active"
    for ended in (S.FAILED, S.CANCELLED, S.TIMED_OUT):
        assert thread_status([], run(ended)) == "closed"
    # only a person's message answered in a Slack thread has a session
    assert session_of({"channel": C, "thread_ts": "1.2", "user": "U1"}) == (C, "1.2")
    assert session_of({"channel": "D1", "user": "U1"}) is None  # a DM's top level
    assert session_of({"channel": C, "thread_ts": "1.2"}) is None  # a schedule's post
