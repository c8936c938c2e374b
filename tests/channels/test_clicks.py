"""``channels.clicks``'s decisions as tables: which clicked message is a run's own, and
where its rights are judged."""

from __future__ import annotations

from typing import Literal

import pytest

from channels.access import Place
from channels.clicks import run_place, verdict
from runtime import ApprovalDelivery, Delivery, Origin, ReplyDelivery, Run, StreamDelivery

C1, C2 = "C0000000001", "C0000000002"


def prompt(call: str, remote: str | None, channel: str = C1) -> ApprovalDelivery:
    return ApprovalDelivery(key=f"k:{call}:{remote}", run_id="r", thread_id="t",
                            channel="slack", target={"channel": channel}, remote_id=remote,
                            tool_call_id=call, name="shell", arguments_hash="h",
                            reason="requires_approval")


def reply(remote: str | None, *, feedback: bool = True, channel: str = C1) -> ReplyDelivery:
    return ReplyDelivery(key=f"k:reply:{remote}", run_id="r", thread_id="t", channel="slack",
                         target={"channel": channel}, remote_id=remote, text="answer",
                         feedback=feedback)


STREAM = StreamDelivery(key="k:stream", run_id="r", thread_id="t", channel="slack",
                        target={"channel": C1}, remote_ids=("5.0",), state="finished")


@pytest.mark.parametrize(("deliveries", "channel", "message", "kind", "call", "expected"), [
    # An approval prompt: its own message, for its own call.
    ([prompt("a", "1.0")], C1, "1.0", "approval", "a", "own"),
    ([prompt("a", "1.0")], C1, "1.0", "approval", None, "own"),
    ([prompt("a", "1.0")], C1, "1.0", "approval", "b", "foreign"),  # another call's
    ([prompt("a", "1.0")], C2, "1.0", "approval", "a", "foreign"),  # another channel
    ([prompt("a", "1.0")], C1, "2.0", "approval", "a", "foreign"),  # another message
    ([prompt("a", "1.0"), prompt("b", "2.0")], C1, "2.0", "approval", "b", "own"),
    ([prompt("a", "1.0"), prompt("b", "2.0")], C1, "1.0", "approval", "b", "foreign"),
    ([reply("1.0")], C1, "1.0", "approval", None, "foreign"),  # an answer is no prompt
    ([], C1, "1.0", "approval", "a", "foreign"),
    # Written, not posted yet: ask again in a moment, but only in the channel it goes to.
    ([prompt("a", None)], C1, "1.0", "approval", "a", "unsent"),
    ([prompt("a", None)], C2, "1.0", "approval", "a", "foreign"),
    ([prompt("a", None)], C1, "1.0", "approval", "b", "foreign"),
    # An answer with the 👍 / 👎: any of its parts' ids, never a prompt or a stream.
    ([reply("1.0,2.0")], C1, "2.0", "reply", None, "own"),
    ([reply("1.0,2.0")], C1, "2.", "reply", None, "foreign"),
    ([reply("1.0")], C2, "1.0", "reply", None, "foreign"),
    ([reply("1.0", feedback=False)], C1, "1.0", "reply", None, "foreign"),
    ([prompt("a", "1.0")], C1, "1.0", "reply", None, "foreign"),
    ([STREAM], C1, "5.0", "reply", None, "foreign"),
    ([STREAM, reply(None)], C1, "5.0", "reply", None, "unsent"),
])
def test_verdict(deliveries: list[Delivery], channel: str, message: str,
                 kind: Literal["approval", "reply"], call: str | None, expected: str) -> None:
    assert verdict(deliveries, channel, message, kind=kind, call=call) == expected


@pytest.mark.parametrize(("origin", "expected"), [
    (Origin(channel="slack", target={"channel": C1}, place=(C1,)), Place((C1,))),
    (Origin(channel="slack", target={"channel": "D1"}, place=("D1",), direct=True),
     Place(("D1",), direct=True)),
    (Origin(channel="discord", place=("10", "9", "8")), Place(("10", "9", "8"))),
    # A schedule's run names no place: judged where its message is (checked first).
    (Origin(channel="slack", target={"channel": C2}), Place((C2,))),
])
def test_the_rights_are_judged_at_the_runs_own_place(origin: Origin, expected: Place) -> None:
    run = Run(id="r", thread_id="t", text="hi", origin=origin)
    assert run_place(run, Place((C2,))) == expected
