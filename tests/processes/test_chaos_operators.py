"""The chaos soak's operators and delivering schedules (chaos/runnow.py, chaos/resumes.py,
chaos/delivering.py, chaos/responses.py), without running a soak: what the plan draws, and
that each check finds what it is there to find."""

from __future__ import annotations

import tomllib
from types import SimpleNamespace
from typing import Any

from chaos.delivering import DISCORD_JOBS, SLACK_JOBS, check_delivered, delivering_toml
from chaos.invariants import RESUMED, Stored
from chaos.model import _turn
from chaos.plan import RESPONSES_TAG, make_plan
from chaos.responses import _answer
from chaos.resumes import Resumed, Resumer
from chaos.runnow import RunsNow
from chaos.schedules import Kept, manual_run
from chaos.system import History
from runtime import AssistantTurn, Entry, Notice, ToolResult, UserMessage
from runtime.engine.history import model_view, resumed_notice
from runtime.model.entries import RUN_FAILED, ToolCall
from runtime.model.runs import Run, RunState
from runtime.providers.openai import to_messages
from schedules import ScheduleConfig, load_schedules
from schedules.runner import manual_key
from tests.fakes.slack import BOT_USER


def test_the_plan_draws_responses_and_runs_now_from_streams_of_their_own() -> None:
    plan = make_plan(7, 120, "postgres", 3)
    responses = [o for o in plan.ops if o.route.startswith("responses")]
    assert {o.route for o in responses} == {"responses", "responses_stream"}
    assert all(RESPONSES_TAG <= int(o.tag[1:]) < RESPONSES_TAG + 1000 for o in responses)
    assert all(o.thread.startswith("chaos/7/t") for o in responses)
    names = {n.schedule for n in plan.runs_now}
    assert names <= {"minute", "pulse", "herald", "crier"} and len(names) > 1, names
    assert any(n.again for n in plan.runs_now)
    quick = [b.at - a.at for a, b in zip(plan.runs_now, plan.runs_now[1:], strict=False)]
    assert min(quick) < 0.5  # twice quickly
    short = make_plan(7, 15, "sqlite", 1)  # no Discord in it: crier is not run
    assert "crier" not in {n.schedule for n in short.runs_now}


def test_the_delivering_schedules_load_with_their_platforms() -> None:
    loaded = tomllib.loads(delivering_toml(SimpleNamespace(), SimpleNamespace()))  # type: ignore[arg-type]
    found = load_schedules([ScheduleConfig(**s) for s in loaded["schedules"]],
                           default_timezone="UTC", channels=["slack", "discord"])
    assert {(s.name, s.config.deliver, s.config.fresh_thread) for s in found} == {
        ("herald", f"slack:{SLACK_JOBS}", False), ("crier", f"discord:{DISCORD_JOBS}", False)}
    only_slack = tomllib.loads(delivering_toml(SimpleNamespace(), None))  # type: ignore[arg-type]
    assert [s["name"] for s in only_slack["schedules"]] == ["herald"]


def _run(run_id: str, key: str, state: str = "completed", reply: str | None = None,
         thread: str = "schedule:pulse") -> Run:
    return Run(id=run_id, thread_id=thread, text="[job pulse] asks for tick",
               state=RunState(state), idempotency_key=key, reply=reply)


def test_a_run_now_is_one_run_per_accepted_request() -> None:
    plan = make_plan(7, 120, "sqlite", 1)
    nows = RunsNow(plan, [], None, History())  # type: ignore[arg-type]
    asked = list(nows.asked.values())[:4]
    nows.asked = {a.now.tag: a for a in asked}
    runs = []
    for i, a in enumerate(asked):
        a.statuses, a.run_ids = [200], [f"r{i}"]
        runs.append(_run(f"r{i}", a.expected_key(), reply=f"answer to j{a.now.schedule}.0"))
    assert all(manual_run(r) for r in runs)
    stored = Stored([], {}, [], {}, [], set())
    assert nows.check(stored, Kept(runs, [])) == []
    asked[1].run_ids.append("r9")  # sent again with its key, answered with another run
    asked[2].statuses = [404]
    runs[3] = runs[3].model_copy(update={"idempotency_key": manual_key(asked[3].now.schedule)})
    ticks = [{"tool": "tick", "applied": True, "run": "r0"}] * 2
    found = nows.check(Stored([], {}, ticks, {}, [], set()), Kept(runs, []))
    what = sorted(v.what.split(" ")[0] + " " + v.what.split(" ")[-2] for v in found)
    assert len(found) == 5 and {v.invariant for v in found} == {3}, [v.what for v in found]
    assert any("ticked 2 times" in v.what for v in found), what
    assert any("nobody asked for" in v.what for v in found)
    assert any("none holds its key" in v.what for v in found)
    assert any("its key holds r1" in v.what for v in found)
    assert any("refused: [404]" in v.what for v in found)


def test_a_delivering_schedules_answer_is_posted_once_and_whole() -> None:
    a, b = "answer to jherald.0123abcd: 1 results", "answer to jherald.4567abcd: 1 results"
    runs = [_run("h1", "schedule:herald:2026-03-02T09:00:00+00:00", reply=a),
            _run("h2", "schedule:herald:manual:0a1b2c3d4e5f", reply=b),
            _run("h3", "schedule:herald:2026-03-02T09:01:00+00:00", "failed")]
    posts: list[str] = []
    slack = SimpleNamespace(messages=lambda c: [{"user": BOT_USER, "text": t} for t in posts]
                            if c == SLACK_JOBS else [])
    failed = "answer to jherald\n\nSorry, I could not finish this (the model service failed)."
    posts += [a, failed, b]
    assert check_delivered(Kept(runs, []), slack, None) == []  # type: ignore[arg-type]
    posts[:] = [a, a, "answer to jher", "answer to jherald.89abcdef: 1 results"]
    found = check_delivered(Kept(runs, []), slack, None)  # type: ignore[arg-type]
    assert sorted((v.invariant, v.what.split(",")[-1].strip()) for v in found) == [
        (1, "posted 0 times in the slack channel C0CHAOSJOBS"),
        (1, "posted 2 times in the slack channel C0CHAOSJOBS"),
        (1, "which no completed run of herald answered"),
        (4, "an answer left half-written in the slack channel C0CHAOSJOBS: 'answer to jher'"),
    ], [v.what for v in found]


def _steps(*moves: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [{"source": s, "target": t, "reason": r} for s, t, r in moves]


def test_a_resumed_run_is_queued_once_per_resume_and_ends_once() -> None:
    workload = SimpleNamespace(plan=make_plan(7, 10, "sqlite", 1), sent={})
    resumer = Resumer(workload, None, History())  # type: ignore[arg-type]
    run = _steps(("queued", "running", "started"), ("running", "failed", "provider_error"),
                 ("failed", "queued", RESUMED), ("queued", "running", "resumed"),
                 ("running", "completed", "completed"))
    resumer.resumed = {"r1": Resumed("t", [200, 409])}
    resumer.details = {"r1": {"state": "completed", "transitions": run}}
    assert resumer.check() == []
    # It answers when it is resumed: out of its thread's order, as a late decision does.
    stored = Stored([], {}, [], dict(resumer.details), [], set())
    assert stored.answers_late("r1") and not stored.answers_late("r2")
    resumer.resumed["r1"].statuses = [200, 200]  # two resumes answered, queued once
    resumer.details["r1"]["transitions"] = [*run, *_steps(("completed", "failed", "x"))]
    found = resumer.check()
    assert sorted(v.what.split(":")[0] for v in found) == [
        "a resumed run ended twice", "resumed 1 times; the resumes were answered [200, 200] "
        "(0 not answered)"], [v.what for v in found]


def test_a_response_is_read_as_its_run() -> None:
    done = {"id": "resp_r1", "status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "answer"}]}]}
    answer = _answer(done, ended=True)
    assert (answer.run_id, answer.state, answer.reply) == ("r1", "completed", "answer")
    going = _answer({"id": "resp_r2", "status": "in_progress", "output": []}, ended=True)
    assert (going.run_id, going.state, going.reply) == ("r2", None, None)


def test_the_model_goes_on_with_a_run_resumed_after_its_thread_went_on() -> None:
    """A run that failed, resumed once a later message was answered: the notice it left in
    its thread asks for its own next turn (its first, or the one after its results), not
    for the thread's last message."""
    call = ToolCall(id="call_m00004_0_0", name="look", arguments={"tag": "m00004", "n": 0})
    asked = "[m00004] cy asks for look then note"
    entries: list[Entry] = [
        UserMessage(run_id="r4", text=asked),
        AssistantTurn(run_id="r4", tool_calls=(call,)),
        ToolResult(run_id="r4", tool_call_id=call.id, name="look", content="seen"),
        Notice(run_id="r4", code=RUN_FAILED, text="This request failed (provider_error)"),
        UserMessage(run_id="r5", text="[m00005] cy asks for nothing"),
        AssistantTurn(run_id="r5", text="answer to m00005: 0 results")]
    went_on = resumed_notice("r4", asked, False, entries, at=1.0)
    assert went_on is not None
    messages = to_messages(model_view([*entries, went_on]))
    assert _turn({"messages": messages}) == ("m00004", 1, [["look"], ["note"]], 1)
    first = [entries[0], Notice(run_id="r4", code=RUN_FAILED, text="failed"), *entries[4:]]
    went_on = resumed_notice("r4", asked, False, first, at=1.0)
    assert went_on is not None
    assert _turn({"messages": to_messages([*first, went_on])}) == (
        "m00004", 0, [["look"], ["note"]], 0)
    assert resumed_notice("r5", "x", False, entries, at=1.0) is None  # its own entries last
