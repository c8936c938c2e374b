"""The soak's Discord acts (chaos/discord_plan.py, chaos/discord_checks.py), without running a
soak: drawn from a stream of their own, so a seed's earlier plan stays as it was; a plan
file round-trips them; and the checks hold a prompt decided twice, a vote that is not the
last click and a command answered twice against maiden."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from channels.feedback import THANKS
from chaos.discord import check_discord, person_id, place_id
from chaos.discord_acts import ClickSeen, DiscordCommandSeen, DiscordStopSeen, answered_as
from chaos.discord_checks import _announced, _clicks, _commands, _votes
from chaos.discord_plan import DiscordActs, DiscordCommand, DiscordStop
from chaos.invariants import RESUMED, Violation
from chaos.plan import Plan, make_plan
from chaos.slack_plan import Vote
from chaos.system import History
from tests.processes.test_chaos_quick import _discord_seen


def test_the_acts_leave_the_rest_of_a_plan_as_it_was_and_replay(tmp_path: Path) -> None:
    plan = make_plan(7, 90, "postgres", 3)
    acts = plan.discord_acts
    assert acts.clicks or acts.stops or acts.votes
    assert acts.commands and all(c.text in ("status", "usage 24h", "help",
                                            "schedule-pause pulse", "schedule-resume pulse")
                                 for c in acts.commands)
    discord = {op.tag: op for op in plan.ops if op.route == "discord"}
    assert set(acts.clicks) <= {t for t, op in discord.items() if op.decide is not None}
    plan.discord_acts = DiscordActs()
    assert asdict(plan) == asdict(_without_acts(make_plan(7, 90, "postgres", 3)))
    plan = make_plan(7, 90, "postgres", 3)
    plan.dump(tmp_path / "plan.json")
    assert asdict(Plan.load(tmp_path / "plan.json")) == asdict(plan)


def _without_acts(plan: Plan) -> Plan:
    plan.discord_acts = DiscordActs()
    return plan


_NO_MESSAGES = SimpleNamespace(messages=lambda channel: [], ephemerals=lambda channel: [])


def _click(custom: str, answered: int | None, said: str, run: str = "r1") -> ClickSeen:
    return ClickSeen("m80001", run, custom, f"i{custom}{said}", 1.0, answered, said)


def test_a_prompt_updated_twice_or_saying_another_decision_is_a_violation() -> None:
    history = History()
    actor = SimpleNamespace(fake=_NO_MESSAGES, clicks=[
        _click("maiden:a:r1:h:c", 7, "Approved by <@5>: `deploy`"),
        _click("maiden:d:r1:h:c", 7, "Denied by <@5>: `deploy`")])
    runs = {"r1": {"decisions": [{"approve": True, "by": "5", "tool_call_id": "c"}]}}
    found = _clicks(actor, {"m80001": "discord:1:2"}, runs, history)  # type: ignore[arg-type]
    assert [v.invariant for v in found] == [1]
    actor.clicks = actor.clicks[:1]
    assert _clicks(actor, {}, runs, history) == []  # type: ignore[arg-type]
    runs["r1"]["decisions"] = [{"approve": False, "by": "5", "tool_call_id": "c"}]
    assert [v.invariant for v in _clicks(actor, {}, runs, history)] == [4]  # type: ignore[arg-type]


def test_a_vote_that_is_not_the_last_acknowledged_click_is_a_violation() -> None:
    vote = Vote("m80002", "ana", up=True, after_s=1, again="other", replica=0)
    clicks = [_click("maiden:f:up:r2", 4, THANKS["up"], "r2"),
              _click("maiden:f:down:r2", 4, THANKS["down"], "r2")]
    actor = SimpleNamespace(fake=_NO_MESSAGES,
                            votes=[SimpleNamespace(vote=vote, run_id="r2", clicks=clicks)])
    stored = [{"run_id": "r2", "user": person_id("ana"), "value": "up",
               "thread_id": "discord:1:2"}]
    found = _votes(actor, {}, stored, History())  # type: ignore[arg-type]
    assert [v.invariant for v in found] == [4]
    stored[0]["value"] = "down"
    assert _votes(actor, {}, stored, History()) == []  # type: ignore[arg-type]
    assert [v.invariant for v in _votes(actor, {}, stored * 2, History())] == [4]  # type: ignore[arg-type]


def test_an_acknowledged_click_that_never_showed_anything_is_unanswered() -> None:
    """maiden acknowledges before it acts: a vote deferred (5) whose thanks never showed,
    or a prompt click deferred (6) whose prompt was never edited nor a line followed, with
    no fault around, was never answered; a fault around excuses it."""
    vote = Vote("m80002", "ana", up=True, after_s=1, again="", replica=0)
    deferred = _click("maiden:f:up:r2", 5, "", "r2")
    actor = SimpleNamespace(fake=_NO_MESSAGES, clicks=[_click("maiden:a:r1:h:c", 6, "")],
                            votes=[SimpleNamespace(vote=vote, run_id="r2", clicks=[deferred])])
    history = History()
    found = _votes(actor, {}, [], history)  # type: ignore[arg-type]
    assert ["nothing was shown" in v.what for v in found] == [True]
    (never,) = _clicks(actor, {}, {}, history)  # type: ignore[arg-type]
    assert "acknowledged, nothing shown" in never.what
    history.events.append((1.5, "kill", "r0"))
    assert _votes(actor, {}, [], history) == []  # type: ignore[arg-type]
    assert _clicks(actor, {}, {}, history) == []  # type: ignore[arg-type]


def test_a_failed_try_before_a_resumed_runs_answer_is_not_a_second_answer() -> None:
    """A run decided, failed mid-answer (its failure notice under what it had shown), then
    resumed (chaos/resumes.py) and completed: its failed try is no answer (seed 7,
    PostgreSQL)."""
    a = "answer to m80000: 0 results"
    failed = "answer to m80000\n\nSorry, I could not finish this (the model service failed)."
    resumed = {"rm80000": {"transitions": [{"target": "queued", "reason": RESUMED}]}}
    people, sent, stored = _discord_seen({"m80000": [failed, a]}, ["m80000"])
    stored.details.update(resumed)
    assert check_discord(make_plan(1, 30, "sqlite", 1), sent, stored, people) == []
    people, sent, stored = _discord_seen({"m80000": [failed, a, a]}, ["m80000"])
    stored.details.update(resumed)  # its answer twice: a violation (the order check leaves
    # a resumed run out of the thread's order: it answers when it is resumed)
    assert [v.invariant for v in check_discord(make_plan(1, 30, "sqlite", 1), sent, stored,
                                               people)] == [1]


def test_a_discord_stop_that_stopped_runs_is_said_once_in_its_channel() -> None:
    channel, pid = place_id("h0"), person_id("ben")
    posted: list[dict[str, Any]] = []
    answers = [{"interaction_metadata": {"id": "9"}, "content": "Stopped 2 run(s)."}]
    fake = SimpleNamespace(world=SimpleNamespace(bot_id="1"),
                           messages=lambda c: posted if c == channel else [],
                           ephemerals=lambda c: answers if c == channel else [])
    seen = DiscordStopSeen(DiscordStop("m80000", "ben", "command", 0.1, False), "r1",
                           channel=channel, sent=True, at=5.0,
                           click=ClickSeen("m80000", "r1", "maiden", "9", 5.0, answered=4))
    actor = SimpleNamespace(fake=fake, stops=[seen])
    history = History()

    def found() -> list[Violation]:
        return _announced(actor, history)  # type: ignore[arg-type]

    assert len(found()) == 1  # not said, with no fault around it
    history.events.append((7.0, "discord", "down 3 s"))
    assert found() == []  # its post may have failed with Discord
    history.events.clear()
    posted.append({"author": {"id": "1"}, "content": f"⏹ <@{pid}> stopped 2 run(s) here."})
    assert found() == []
    posted.append(dict(posted[0]))
    assert len(found()) == 1  # said twice
    answers[0]["content"] = "Nothing is running here."
    posted.clear()
    assert found() == []


def test_a_deferred_command_never_edited_is_unanswered_not_an_empty_answer() -> None:
    """chaos seed 9595 (finding 40 in chaos/README.md): three ``/maiden`` commands were
    deferred (callback 5) by the replica holding the gateway, which was killed (30 s after
    its SIGTERM, the store restarting) before their answers' 10 s deadline; no edit of
    ``@original`` was ever sent. The check read the deferred "thinking" message that
    Discord made (flag LOADING, no content) as the answer, ``['']``. That message is no
    answer: the command went unanswered, which a fault up to the answer's deadline after it
    excuses; an edited one is judged by what it says."""
    channel = place_id("h1")
    made: list[dict[str, Any]] = [{"interaction_metadata": {"id": "9"}, "content": "",
                                   "flags": 64 | 128}]  # EPHEMERAL | LOADING
    fake = SimpleNamespace(world=SimpleNamespace(bot_id="1"), messages=lambda c: [],
                           ephemerals=lambda c: made if c == channel else [])
    seen = DiscordCommandSeen(DiscordCommand(1455.2, "status", "h1", "ben"), channel,
                              click=ClickSeen("status", "", "maiden", "9", 1455.2,
                                              answered=5))
    actor = SimpleNamespace(fake=fake, commands=[seen], stops=[])
    history = History()

    def found() -> list[str]:
        return [v.what for v in _commands(actor, history)]  # type: ignore[arg-type]

    (alone,) = found()  # with no fault around: never answered
    assert "never answered (deferred, never edited)" in alone, alone
    history.events.append((1463.27, "term", "r0: still running 30 s later, killed"))
    assert found() == []  # killed within the answer's deadline: it may go unanswered
    made[0].update(content="", flags=64)  # edited, to nothing: an empty answer
    assert [d for d in found() if "with ['']" in d]
    made[0].update(content="Nothing is running here.")
    assert found() == []


@pytest.mark.parametrize(("callback", "shown", "answered"), [
    (4, [{"id": "line"}], 4), (7, [{"id": "prompt"}], 7),
    (6, [], 6), (6, [{"id": "prompt"}], 7), (6, [{"id": "follow-up"}], 4),
    (5, [], 5), (5, [{"id": "thinking, edited"}], 4)])
def test_a_deferral_counts_as_what_its_edit_or_follow_up_showed(
        callback: int, shown: list[dict[str, Any]], answered: int) -> None:
    """maiden acknowledges before it acts: a 6 whose edit changed the prompt is the
    prompt updated (7), one answered by a follow-up a line (4); a 5 edited a line."""
    assert answered_as(callback, shown, {"id": "prompt"}) == answered
