"""When an outbox record goes (``runtime/outbox/ordering.py``) as tables: which records hold
the later ones of their place back, when a run's reply is not streamed, and which records
the run has moved past."""

from __future__ import annotations

import pytest

from runtime.model.runs import (
    ApprovalDelivery,
    Delivery,
    Origin,
    PendingApproval,
    ReplyDelivery,
    Run,
    RunState,
    StreamDelivery,
)
from runtime.outbox.ordering import ORDER_HOLD_S, holds_back, place, superseded, waits_behind

S = RunState
NOW = 1_000.0


def reply(key: str, *, run_id: str = "r1", channel: str = "slack", answer: bool = True,
          age: float = 1.0) -> ReplyDelivery:
    return ReplyDelivery(key=key, run_id=run_id, thread_id="t1", channel=channel, text=key,
                         answer=answer, created_at=NOW - age)


def prompt(key: str, call: str = "c1", *, run_id: str = "r1") -> ApprovalDelivery:
    return ApprovalDelivery(key=key, run_id=run_id, thread_id="t1", channel="slack",
                            tool_call_id=call, name="deploy", arguments_hash="h",
                            reason="requires_approval", created_at=NOW - 1.0)


def stream(key: str, *, run_id: str = "r0") -> StreamDelivery:
    return StreamDelivery(key=key, run_id=run_id, thread_id="t1", channel="slack",
                          created_at=NOW - 1.0)


def run(state: RunState = S.RUNNING, *, reason: str = "", call: str | None = None) -> Run:
    pending = None if call is None else PendingApproval(
        tool_call_id=call, name="deploy", arguments_hash="h", reason="requires_approval",
        requested_at=NOW)
    return Run(id="r1", thread_id="t1", text="go", state=state, reason=reason,
               origin=Origin(channel="slack", target={"channel": "C1"}),
               pending_approval=pending)


def test_a_place_is_a_threads_channel_whatever_the_target() -> None:
    one = reply("a").model_copy(update={"target": {"channel": "C1", "user": "U1"}})
    other = reply("b").model_copy(update={"target": {"channel": "C1", "user": "U2"}})
    assert place(one) == place(other) == ("t1", "slack")
    assert place(reply("c", channel="discord")) == ("t1", "discord")


@pytest.mark.parametrize(("age", "holds"), [
    (0.0, True),
    (ORDER_HOLD_S - 0.1, True),
    (ORDER_HOLD_S, False),  # held long enough: the conversation goes on without it
    (ORDER_HOLD_S * 10, False),
])
def test_a_record_left_in_the_outbox_holds_back_the_later_ones_for_a_while(
        age: float, holds: bool) -> None:
    assert holds_back(reply("a", age=age), NOW) is holds


@pytest.mark.parametrize(("pending", "behind"), [
    ([], False),
    ([reply("own")], False),  # its own records (a notice at its start) go before it anyway
    ([reply("older", run_id="r0")], True),
    ([reply("older", run_id="r0", channel="discord")], False),  # another place
    ([reply("older", run_id="r0", age=ORDER_HOLD_S + 1)], False),  # held long enough
    ([stream("open", run_id="r0")], False),  # finished by its own run's reply
    ([stream("open"), reply("older", run_id="r0")], True),
])
def test_a_reply_is_not_streamed_while_an_earlier_runs_message_waits(
        pending: list[Delivery], behind: bool) -> None:
    assert waits_behind(run(), pending, NOW) is behind


@pytest.mark.parametrize(("delivery", "now", "records", "why"), [
    # A prompt: posted while the run waits on its call (or timed out waiting on it).
    (prompt("p"), run(S.AWAITING_APPROVAL, call="c1"), [], None),
    (prompt("p"), run(S.TIMED_OUT, reason="approval_timeout", call="c1"), [], None),
    (prompt("p"), run(S.RUNNING), [],
     "the run no longer waits for a decision on deploy (run running)"),
    (prompt("p"), run(S.AWAITING_APPROVAL, call="c2"), [],
     "the run no longer waits for a decision on deploy (run awaiting_approval)"),
    (prompt("p"), run(S.AWAITING_APPROVAL, call="c1"), [prompt("p"), prompt("again")],
     "the run asked again since"),
    # Closing words: posted while the run stands at the end they close.
    (reply("end"), run(S.COMPLETED), [], None),
    (reply("end"), run(S.RUNNING), [], "the run went on after it (run running)"),
    (reply("end"), run(S.FAILED), [reply("end"), reply("later")], "the run ended again since"),
    (reply("end"), run(S.FAILED), [reply("later"), reply("end")], None),  # it is the last
    # What a tool posts is never superseded.
    (reply("tool", answer=False), run(S.RUNNING), [], None),
])
def test_a_record_the_run_has_moved_past_is_not_posted(
        delivery: Delivery, now: Run, records: list[Delivery], why: str | None) -> None:
    assert superseded(delivery, now, records) == why
