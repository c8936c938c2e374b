"""The soak's Slack beyond messages (chaos/slack_plan.py, slack_acts.py, slack_checks.py),
without running a soak: the plan draws HTTP replicas, stops, votes and commands from
streams of their own; and the checks find a cancelled run closed twice, an acknowledged
stop its run outlived, a command answered twice or announced twice, and a vote recorded
other than last clicked or told twice."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from channels.feedback import THANKS, UNRECORDED
from chaos.invariants import Stored
from chaos.plan import Command, Plan, Stop, Vote, make_plan
from chaos.sent import Sent
from chaos.slack_acts import ON_IT, Click, CommandSeen, SlackActs, StopSeen, VoteSeen, told_again
from chaos.slack_checks import check_acts, check_slack
from chaos.slack_wire import SlackWire
from chaos.system import History
from tests.fakes.slack import BOT, BOT_USER, TEAM, FakeSlack

CHANNEL = "C0CHAOS001"


def test_the_slack_of_a_plan_is_drawn_from_streams_of_its_own(tmp_path: Path) -> None:
    plan = make_plan(7, 120, "postgres", 3)
    assert 1 <= len(plan.slack_http) <= 2  # a replica each way, at least
    slack = {o.tag: o for o in plan.ops if o.route == "slack"}
    assert {s.tag for s in plan.stops} <= set(slack) and plan.votes and plan.commands
    assert all(slack[s.tag].decide is not None for s in plan.stops if s.waiting)
    assert any(s.waiting for s in plan.stops) and any(not s.waiting for s in plan.stops)
    assert not {s.tag for s in plan.stops} & {v.tag for v in plan.votes}
    # SQLite's one replica takes Slack either way, by the seed.
    assert {tuple(make_plan(s, 120, "sqlite", 1).slack_http) for s in (7, 8)} == {(), (0,)}
    # A plan written before them replays with none: every replica in Socket Mode.
    plan.dump(tmp_path / "old.json")
    raw = json.loads((tmp_path / "old.json").read_text())
    for key in ("slack_http", "stops", "votes", "commands"):
        del raw[key]
    (tmp_path / "old.json").write_text(json.dumps(raw))
    old = Plan.load(tmp_path / "old.json")
    assert (old.slack_http, old.stops, old.votes, old.commands) == ([], [], [], [])
    assert old.ops == plan.ops


def _acts() -> tuple[SlackActs, History]:
    history = History()
    fake = FakeSlack()
    return SlackActs(fake, SlackWire(fake, [], [], history), history, {}), history


def _stored(runs: list[dict[str, Any]], thread: str) -> Stored:
    entries = {thread: [{"kind": "user", "run_id": r["run_id"]} for r in runs]}
    return Stored(runs, entries, [], {}, [], set())


def test_a_cancelled_runs_closing_line_shows_once() -> None:
    fake = FakeSlack()
    root = fake.post_as_user(CHANNEL, "U0CHAOSANA", "hi")["ts"]
    thread = f"slack:{TEAM}:{CHANNEL}:{root}"
    runs: list[dict[str, Any]] = [{"run_id": "r1", "thread_id": thread, "state": "completed",
             "reply": "answer to m00001: 0 results"},
            {"run_id": "r2", "thread_id": thread, "state": "cancelled", "reply": None}]
    plan = make_plan(1, 30, "sqlite", 1)
    plan.threads = [f"slack/1/{CHANNEL}/s00"]
    bot = {"user": BOT_USER, "bot_id": BOT}
    fake.store.post(CHANNEL, {**bot, "text": "answer to m00001: 0 results"}, thread_ts=root)
    closing = "answer to m0\n\nStopped (cancelled by U0CHAOSANA)."  # (a stream cut short)
    fake.store.post(CHANNEL, {**bot, "text": closing}, thread_ts=root)
    assert check_slack(plan, {}, _stored(runs, thread), fake) == []
    fake.store.post(CHANNEL, {**bot, "text": "Stopped (cancelled by ana)."}, thread_ts=root)
    (found,) = check_slack(plan, {}, _stored(runs, thread), fake)
    assert found.invariant == 1 and "2 closing line(s)" in found.what


def _stop(waiting: bool, state: str, after_s: float) -> tuple[SlackActs, Stored]:
    acts, _ = _acts()
    seen = StopSeen(Stop("m00001", "ana", "text", 0.5, waiting, 0), run_id="r1", how="text",
                    state="running", first=True, acked=True, at=10.0, wall=time.time())
    acts.stops.append(seen)
    run = {"run_id": "r1", "thread_id": "t", "state": state, "updated_at": time.time() + after_s}
    return acts, _stored([run], "t")


def test_an_acknowledged_stop_ends_its_run() -> None:
    history = History()
    for waiting, state, after_s, bad in [
            (True, "cancelled", 1, False), (True, "completed", 3, True),
            (False, "completed", 2, False),  # it was answering already
            (False, "completed", 40, True), (False, "cancelled", 40, False)]:
        acts, stored = _stop(waiting, state, after_s)
        found = check_acts(acts, {}, stored, [], history)
        assert [v.invariant for v in found] == ([6] if bad else []), (waiting, state, found)
    # Stopped while waiting, it timed out instead: unless the wait was about to time out
    # as the stop came, or a clock was off, the stop was lost.
    for asked_ago, skew, bad in [(1.0, False, True), (6.5, False, False), (1.0, True, False)]:
        acts, stored = _stop(True, "timed_out", 8)
        stored.details["r1"] = {"transitions": [
            {"target": "awaiting_approval", "at": time.time() - asked_ago}]}
        history = History()
        if skew:
            history.events = [(5.0, "skew", "r1 +3.0s for 20s (maiden's clock)")]
        found = check_acts(acts, {}, stored, [], history)
        assert [v.invariant for v in found] == ([6] if bad else []), (asked_ago, skew, found)


def _command(text: str, shown: str, later: list[str], announced: list[str] | None = None
             ) -> CommandSeen:
    return CommandSeen(Command(1.0, text, CHANNEL, "ana", 0), at=1.0, acked=True, shown=shown,
                       later=later, announced=announced or [], sure=True)


def test_a_command_is_answered_once_and_a_stop_said_once() -> None:
    acts, history = _acts()
    acts.commands = [
        _command("status", "Nothing is running here.", []),
        _command("usage 24h", ON_IT, ["The last 24 hours:\n• here: 0 run(s)"]),
        _command("stop", "Stopped 2 run(s).", [], ["⏹ <@U0CHAOSANA> stopped 2 run(s) here."]),
        _command("schedules", "Something failed: the store is out of reach", []),
    ]
    assert check_acts(acts, {}, _stored([], "t"), [], history) == []
    acts.commands = [
        _command("status", ON_IT, ["Nothing is running here.", "Nothing is running here."]),
        _command("help", "Nothing is running here.", []),  # another command's answer
        _command("stop", "Stopped 1 run(s).", [], ["⏹ <@U0CHAOSANA> stopped 1 run(s) here."] * 2),
        _command("usage 24h", "The last 24 hours:\n…", ["The last 24 hours:\n…"]),
    ]
    found = check_acts(acts, {}, _stored([], "t"), [], history)
    assert [v.what.split(" was ")[0].split(" answered ")[0] for v in found] == [
        "/maiden status by ana at 1.0s", "/maiden help by ana at 1.0s",
        "/maiden stop by ana at 1.0s", "/maiden usage 24h by ana at 1.0s"], found


def _vote(clicks: list[tuple[bool, list[str]]]) -> VoteSeen:
    return VoteSeen(Vote("m00001", "ana", True, 1.0, "", 0), run_id="r1",
                    clicks=[Click(up, True, told, True, 1.0) for up, told in clicks])


def test_a_vote_is_recorded_once_as_last_clicked_and_told_once() -> None:
    acts, history = _acts()
    up, down = THANKS["up"], THANKS["down"]
    sent = {"m00001": Sent(make_plan(1, 30, "sqlite", 1).ops[0], key="k", thread="t")}
    stored = [{"run_id": "r1", "user": "U0CHAOSANA", "value": "down", "thread_id": "t"}]
    acts.votes = [_vote([(True, [up]), (True, []), (False, [down])])]
    assert check_acts(acts, sent, _stored([], "t"), stored, history) == []
    acts.votes = [_vote([(True, [up]), (True, [up])])]  # told again on the same click
    found = check_acts(acts, sent, _stored([], "t"), stored, history)
    assert sorted(v.invariant for v in found) == [1, 4, 4]  # and the store has down
    acts.votes = [_vote([(True, [up])])]
    stranger = {"run_id": "r9", "user": "U0CHAOSBEN", "value": "up", "thread_id": "t"}
    found = check_acts(acts, sent, _stored([], "t"), [stranger], history)
    assert sorted(v.what.split(":")[0] for v in found) == ["a vote up by U0CHAOSBEN that "
                                                           "nobody gave", "m00001"]


def test_a_vote_the_store_could_not_take_is_clicked_again_not_counted() -> None:
    """chaos seed 52 (PostgreSQL, 75 s): two 👍/👎 met a connection cut and were told
    ``UNRECORDED`` ("please click again in a moment", channels/feedback.py); the check took
    that for a wrong answer and the store's missing vote for a lost one. The person clicks
    again, and the vote is what that click recorded."""
    acts, history = _acts()
    down = THANKS["down"]
    sent = {"m00001": Sent(make_plan(1, 30, "sqlite", 1).ops[0], key="k", thread="t")}
    stored = [{"run_id": "r1", "user": "U0CHAOSANA", "value": "down", "thread_id": "t"}]
    acts.votes = [_vote([(False, [UNRECORDED]), (False, [down])])]
    assert told_again([UNRECORDED])
    assert check_acts(acts, sent, _stored([], "t"), stored, history) == []
    acts.votes = [_vote([(False, [UNRECORDED]), (False, [down])])]
    found = check_acts(acts, sent, _stored([], "t"), [], history)
    assert [v.invariant for v in found] == [4]  # thanked, and the store has no vote
