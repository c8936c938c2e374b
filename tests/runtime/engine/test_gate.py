"""The call gate (runtime/engine/gate.py) and typed run changes, as tables: no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import NOT_DONE, Run, RunState, ToolContext, tool
from runtime.engine.gate import CallFacts, Pause, Reconcile, Refuse, Verdict, gate_call
from runtime.model.runs import changed, transition


@tool
def look(q: str) -> str:
    """Read something."""
    return q


@tool(effect="non_idempotent")
def pay(amount: int) -> str:
    """Pay."""
    return "paid"


@tool(effect="non_idempotent")
def send_mail(to: str) -> str:
    """Send mail."""
    return "sent"


@send_mail.reconcile
def _sent(ctx: ToolContext) -> Any:
    return NOT_DONE


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy."""
    return env


def facts(tool_: Any = look, **changes: Any) -> CallFacts:
    base: dict[str, Any] = {"name": getattr(tool_, "name", "ghost"), "index": 0,
                            "calls_before": 0, "tool": tool_, "offered": True}
    return CallFacts(**{**base, **changes})


def kind(verdict: Verdict) -> str:
    if isinstance(verdict, Refuse):
        return f"refuse:{verdict.kind}"
    if isinstance(verdict, Pause):
        return f"pause:{verdict.reason}"
    if isinstance(verdict, Reconcile):
        return "reconcile"
    return "run+claim" if verdict.claim else "run"


TABLE = [
    ("a plain read", facts(), "run"),
    ("a non_idempotent call is claimed first", facts(pay), "run+claim"),
    ("past the per-turn limit", facts(index=8), "refuse:too_many_calls"),
    ("limit wins over everything", facts(None, index=8), "refuse:too_many_calls"),
    ("past the run's budget", facts(calls_before=5), "refuse:too_many_calls"),
    ("unknown tool", facts(None, name="ghost"), "refuse:unknown_tool"),
    ("final turn offers no tools", facts(None, name="look", offered=False),
     "refuse:unknown_tool"),
    ("bad arguments", facts(invalid="q: field required"), "refuse:invalid_arguments"),
    ("bad arguments before the repeat guard", facts(invalid="x", repeat=True),
     "refuse:invalid_arguments"),
    ("repeated call", facts(repeat=True), "refuse:loop_detected"),
    ("repeat guard before a denial", facts(deploy, repeat=True, decision=False),
     "refuse:loop_detected"),
    ("denied", facts(deploy, decision=False), "refuse:denied"),
    ("denied even when uncertain", facts(pay, decision=False, started=True), "refuse:denied"),
    ("needs approval", facts(deploy), "pause:requires_approval"),
    ("approved", facts(deploy, decision=True), "run"),
    ("cut off after its claim, no hook", facts(pay, started=True),
     "pause:uncertain_side_effect"),
    ("cut off after its claim, with a hook", facts(send_mail, started=True), "reconcile"),
    ("cut off, then approved by a person", facts(pay, started=True, decision=True),
     "run+claim"),
    ("a started read is just run again", facts(look, started=True), "run"),
]


@pytest.mark.parametrize(("what", "call", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_gate(what: str, call: CallFacts, expected: str) -> None:
    verdict = gate_call(call, per_turn=8, per_run=5, repeat_limit=3, tool_names=("look",))
    assert kind(verdict) == expected


def test_refusals_say_why() -> None:
    unknown = gate_call(facts(None, name="ghost"), per_turn=8, per_run=None, repeat_limit=3,
                        tool_names=("look", "deploy"))
    assert isinstance(unknown, Refuse)
    assert unknown.message == "there is no tool 'ghost' (available tools: deploy, look)"
    denied = gate_call(facts(deploy, decision=False, decided_by="alice", decision_reason="no"),
                       per_turn=8, per_run=None, repeat_limit=3)
    assert isinstance(denied, Refuse) and denied.message == "a person denied this call by " \
        "alice: no"
    final = gate_call(facts(None, name="look", offered=False), per_turn=8, per_run=None,
                      repeat_limit=3)
    assert isinstance(final, Refuse) and "final turn" in final.message


def test_a_misspelt_change_is_refused() -> None:
    run = Run(id="r", thread_id="t", text="hi")
    with pytest.raises(TypeError, match="ownr"):
        changed(run, 1.0, **{"ownr": "me"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ownr"):
        transition(run, RunState.RUNNING, "go", **{"ownr": "me"})  # type: ignore[arg-type]
    moved, _ = transition(run, RunState.RUNNING, "go", owner="me", now=2.0)
    assert (moved.owner, moved.state, moved.updated_at) == ("me", RunState.RUNNING, 2.0)
