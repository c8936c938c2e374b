"""A prompt or closing words that a run has moved past are not posted, and never end the
stream its answer is being written in (``runtime/outbox/delivery.py`` ``superseded``,
``runtime/outbox/live.py`` ``finish``). The chaos soak's finding 4, ``stale-note-finishes-stream``
(chaos/README.md): a prompt, or a timed-out run's notice, written while the channel was not
up and sent late by the outbox's sweep, after the run was decided through the API and had
begun streaming its answer, finished that stream with its note ("⏸ waiting for a person to
approve the next step", "Nobody approved deploy in time…") and recorded it finished, so the
answer was posted again as a message of its own: shown twice; and the prompt offered
buttons for a call already decided. With the reference chat channel's streamer
(tests/fakes/chat.py): what a person sees is ``visible()``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    AgentConfig,
    ApprovalDelivery,
    Delivery,
    DeliveryError,
    ModelRequest,
    ModelResponse,
    Origin,
    ReplyDelivery,
    Run,
    RunState,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    StreamDelivery,
    ToolRegistry,
    ToolUpdate,
    tool,
)
from runtime.model.runs import NOT_POSTED, PendingApproval
from runtime.outbox.ordering import superseded
from tests.fakes.chat import MemoryChat, MemoryStreamer

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")
ANSWER = "Deployed the api at 09:14; every check is green."
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "deploy", "arguments": {"service": "api"}}]},
    {"text": ANSWER, "chunks": 4}]


@tool(requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class OpeningStreamer(MemoryStreamer):
    """The reference streamer, saying when a stream has opened."""

    def __init__(self, chat: MemoryChat) -> None:
        super().__init__(chat)
        self.opened = asyncio.Event()

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        ids = await super().open_stream(stream, text, tools)
        self.opened.set()
        return ids


class ConnectingChat(MemoryChat):
    """The reference channel with its streamer, not connected yet while ``offline`` says
    why (as Slack's is while it connects): a send fails at once."""

    def __init__(self) -> None:
        super().__init__()
        self.streamer: OpeningStreamer = OpeningStreamer(self)
        self.offline: str | None = "not connected yet"

    async def send(self, delivery: Delivery) -> str:
        if self.offline is not None:
            raise DeliveryError(f"not tried: {self.offline}")
        return await super().send(delivery)


class Midway:
    """The scripted model, holding its ``held``-th answer after the first piece of its text
    until ``go`` is set (``streaming`` is set then): a moment at which the answer is being
    streamed, for the outbox's sweep to come."""

    def __init__(self, model: ScriptedProvider, held: int) -> None:
        self.model = model
        self.held = held
        self.streaming = asyncio.Event()
        self.go = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        if len(self.model.calls) + 1 != self.held or on_text is None:
            return await self.model.complete(request, on_text)
        pieces = 0

        async def held(piece: str) -> None:
            nonlocal pieces
            await on_text(piece)
            pieces += 1
            if pieces == 1:
                self.streaming.set()
                await self.go.wait()

        return await self.model.complete(request, held)


@asynccontextmanager
async def serving(tmp_path: Path, script: Sequence[dict[str, Any]], held: int,
                  clock: Any = time.time, **agent: Any
                  ) -> AsyncIterator[tuple[Runtime, Midway, ConnectingChat]]:
    """A runtime that does not sweep its outbox by itself (``start(serve=False)``): the
    test sweeps it (``flush_deliveries``, as the serving loop does every few seconds) at
    the moment the soak's sweep came. It is built with its channel's deliverer, not
    connected yet."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        model = Midway(ScriptedProvider(script), held)
        chat = ConnectingChat()
        rt = Runtime(store, model, ToolRegistry([deploy]), agent=AgentConfig(**agent),
                     clock=clock, deliverers={"chat": chat})
        await rt.start(serve=False)
        try:
            yield rt, model, chat
        finally:
            model.go.set()
            await rt.close()


async def _opened(chat: ConnectingChat) -> None:
    """Until the answer's stream has opened (its first piece shown)."""
    await asyncio.wait_for(chat.streamer.opened.wait(), 10)


async def test_a_prompt_decided_before_it_went_out_is_not_posted_nor_ends_the_answers_stream(
        tmp_path: Path) -> None:
    """stale-note-finishes-stream, the prompt: it could not be sent (the channel was not
    up); the call is approved through the API; the run streams its answer; the sweep then
    comes. Nothing asks for a decided call, and the answer is one message, shown once."""
    async with serving(tmp_path, SCRIPT, held=2) as (rt, model, chat):
        paused = await rt.send("t", "ship it", origin=ROOM)
        await rt.idle()
        assert paused.state is S.AWAITING_APPROVAL and paused.pending_approval is not None
        chat.offline = None  # connected; the sweep has not come yet
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True,
                        by="ops")
        await asyncio.wait_for(model.streaming.wait(), 10)
        await _opened(chat)
        await rt.operator.flush_deliveries()  # the sweep: the prompt waited in the outbox
        model.go.set()
        done = await rt.wait(paused.id)
        await rt.idle()
        records = {d.kind: d for d in await rt.records.deliveries(run_id=paused.id)}
    assert done.state is S.COMPLETED and done.reply == ANSWER
    assert chat.posted == []  # no prompt for a decided call, no second answer
    assert chat.streamer.visible() == [ANSWER]
    assert records["approval"].remote_id == NOT_POSTED and not records["approval"].posted
    assert records["reply"].remote_id == records["stream"].remote_id == "s1"


async def test_a_timeout_notice_sent_after_a_late_decision_does_not_end_the_answers_stream(
        tmp_path: Path) -> None:
    """stale-note-finishes-stream, the notice: the approval times out (its notice cannot be
    sent either); a late approval through the API takes the run on, and its answer streams
    when the sweep comes. Neither the prompt nor the notice, which the run has moved past,
    is posted, and the answer is shown once."""
    clock = _Clock()
    async with serving(tmp_path, SCRIPT, held=2, clock=clock,
                       approval_timeout_s=60) as (rt, model, chat):
        paused = await rt.send("t", "ship it", origin=ROOM)
        await rt.idle()
        clock.now += 61
        (expired,) = await rt._upkeep.expire_approvals()  # what the serving loop does
        assert expired.state is S.TIMED_OUT and chat.posted == []
        chat.offline = None
        assert expired.pending_approval is not None
        await rt.decide(paused.id, expired.pending_approval.tool_call_id, approve=True,
                        by="ops")
        await asyncio.wait_for(model.streaming.wait(), 10)
        await _opened(chat)
        await rt.operator.flush_deliveries()
        model.go.set()
        done = await rt.wait(paused.id)
        await rt.idle()
        records = await rt.records.deliveries(run_id=paused.id)
    assert done.state is S.COMPLETED
    assert chat.posted == []
    assert chat.streamer.visible() == [ANSWER]
    assert [(d.kind, d.posted) for d in records if d.kind != "stream"] == [
        ("approval", False), ("reply", False), ("reply", True)]


async def test_a_late_note_that_reaches_the_stream_leaves_the_newer_stretchs_alone(
        tmp_path: Path) -> None:
    """Should a stale prompt get past the outbox's look at its run (the decision landed
    just after), ending the run's streams does not touch the stream of the stretch the run
    began here since it was written, nor stop that stretch's streaming."""
    async with serving(tmp_path, SCRIPT, held=2) as (rt, model, chat):
        paused = await rt.send("t", "ship it", origin=ROOM)
        await rt.idle()
        chat.offline = None
        assert paused.pending_approval is not None
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True,
                        by="ops")
        await asyncio.wait_for(model.streaming.wait(), 10)
        await _opened(chat)
        (prompt,) = [d for d in await rt.records.deliveries(run_id=paused.id)
                     if isinstance(d, ApprovalDelivery)]
        assert not await rt._parts.outbox.live.finish(prompt)
        model.go.set()
        await rt.wait(paused.id)
        await rt.idle()
    assert chat.streamer.visible() == [ANSWER]
    assert chat.posted == []


async def test_a_cancelled_runs_closing_line_is_judged_by_the_run_as_it_is_now(
        tmp_path: Path) -> None:
    """chaos seed 9595 (finding 39 in chaos/README.md): one replica's worker read a run
    paused for approval (``drive`` hands a run it may not drive back as read), another
    replica then cancelled it (its closing line ``Stopped (…).`` written with the
    ``cancelled`` state), and the first replica's ``send_pending`` of the run it had read
    found that line in the outbox and judged it by its stale copy of the run, still
    ``awaiting_approval``: "the run went on after it", recorded as not to be posted. The
    thread's second cancelled run had no closing line in Slack. The line (and the prompt,
    which the cancelled run no longer waits on) is judged by the run as the store holds it
    after the records were read: the line is posted once, the prompt is not."""
    async with serving(tmp_path, SCRIPT, held=2) as (rt, _model, chat):
        paused = await rt.send("t", "ship it", origin=ROOM)
        await rt.idle()
        assert paused.state is S.AWAITING_APPROVAL  # as the first replica read it
        cancelled = await rt.cancel(paused.id, by="ben")  # "the other replica": its send
        assert cancelled.state is S.CANCELLED  # of the closing line fails (not connected)
        chat.offline = None
        await rt._parts.outbox.send_pending(paused)  # what the worker does with its copy
        await rt.idle()
        records = await rt.records.deliveries(run_id=paused.id)
    assert [m.text for m in chat.posted] == ["Stopped (cancelled by ben)."]
    assert [(d.kind, d.posted) for d in records] == [("approval", False), ("reply", True)]


class _Clock:
    """Now, until moved on."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


# -- the rule, as a table

_T = {"room": "r1"}
_PENDING = PendingApproval(tool_call_id="c1", name="deploy", arguments_hash="h",
                           reason="requires_approval", requested_at=1.0)


def _prompt(key: str = "p1", call: str = "c1") -> ApprovalDelivery:
    return ApprovalDelivery(key=key, run_id="r", thread_id="t", channel="chat", target=_T,
                            tool_call_id=call, name="deploy", arguments_hash="h",
                            reason="requires_approval", created_at=1.0)


def _said(key: str, *, answer: bool = True) -> ReplyDelivery:
    return ReplyDelivery(key=key, run_id="r", thread_id="t", channel="chat", target=_T,
                         text=key, answer=answer, created_at=1.0)


def _run(state: RunState, pending: PendingApproval | None = None, reason: str = "") -> Run:
    return Run(id="r", thread_id="t", text="x", state=state, pending_approval=pending,
               reason=reason)


@pytest.mark.parametrize(("delivery", "run", "records", "stale"), [
    # A prompt: posted while a person may still decide on its call.
    (_prompt(), _run(S.AWAITING_APPROVAL, _PENDING), [_prompt()], False),
    (_prompt(), _run(S.TIMED_OUT, _PENDING, "approval_timeout"), [_prompt()], False),
    (_prompt(), _run(S.AWAITING_TOOL), [_prompt()], True),  # approved
    (_prompt(), _run(S.RUNNING), [_prompt()], True),  # denied, the run goes on
    (_prompt(), _run(S.COMPLETED), [_prompt()], True),
    (_prompt(), _run(S.CANCELLED), [_prompt()], True),
    (_prompt(call="c0"), _run(S.AWAITING_APPROVAL, _PENDING), [_prompt(call="c0")], True),
    (_prompt(), _run(S.AWAITING_APPROVAL, _PENDING), [_prompt(), _prompt("p2")], True),
    # Closing words: posted while the run stays ended, unless it ended again since.
    (_said("stop"), _run(S.CANCELLED), [_said("stop")], False),
    (_said("late"), _run(S.TIMED_OUT, _PENDING, "approval_timeout"), [_said("late")], False),
    (_said("late"), _run(S.QUEUED), [_said("late")], True),  # decided late
    (_said("late"), _run(S.RUNNING), [_said("late")], True),
    (_said("late"), _run(S.COMPLETED), [_said("late"), _said("answer")], True),
    (_said("answer"), _run(S.COMPLETED), [_said("late"), _said("answer")], False),
    (_said("failed"), _run(S.FAILED), [_said("failed"), _said("note", answer=False)], False),
    # What a tool posts, and a start's notice, are never superseded.
    (_said("note", answer=False), _run(S.RUNNING), [_said("note", answer=False)], False),
    (_said("note", answer=False), _run(S.COMPLETED),
     [_said("note", answer=False), _said("answer")], False),
])
def test_what_a_run_has_moved_past_is_superseded(
        delivery: Delivery, run: Run, records: list[Delivery], stale: bool) -> None:
    assert (superseded(delivery, run, records) is not None) is stale
