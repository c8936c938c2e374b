"""The soak's Discord RESUMEs (chaos/discord_resume.py) without running a soak: drawn from a
stream of their own, each with a ``/maiden status`` inside its gap; and the checks hold
what was replayed in time to what a live dispatch is held to, excusing only an interaction
replayed too near its 3 s (or never replayed) and nothing else."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from chaos.discord import check_discord
from chaos.discord_acts import NEVER_REPLAYED, ClickSeen, DiscordCommandSeen
from chaos.discord_checks import _clicks, _commands
from chaos.discord_plan import RESUME_GAP_S, DiscordCommand
from chaos.discord_resume import replayed_late
from chaos.plan import make_plan
from chaos.system import History
from tests.processes.test_chaos_quick import _discord_seen


def test_every_pass_with_discord_resumes_with_a_command_in_each_gap() -> None:
    for store, replicas in (("postgres", 3), ("sqlite", 1)):
        plan = make_plan(52, 75, store, replicas)
        resumes = [f for f in plan.faults if f.kind == "discord_resume"]
        assert resumes, store  # CI's pass (seed 52, 75 s) has some
        assert {f.mode for f in resumes} <= {"reconnect", "close"}
        for f in resumes:
            assert RESUME_GAP_S[0] <= f.duration_s <= RESUME_GAP_S[1]
            assert any(c.text == "status" and f.at < c.at < f.at + f.duration_s
                       for c in plan.discord_acts.commands), f
        assert make_plan(52, 75, store, replicas) == plan
    assert not [f for f in make_plan(52, 15, "sqlite", 1).faults  # no Discord: none
                if f.kind == "discord_resume"]


def test_an_interaction_replayed_too_late_or_never_is_excused() -> None:
    assert not replayed_late(False, None)  # a live one: judged as ever
    assert not replayed_late(True, 0.8)
    assert replayed_late(True, 2.5)  # under a second of its 3 s left
    assert replayed_late(True, None)  # never replayed (the holder went)


def _prompt_click(**held: Any) -> ClickSeen:
    return ClickSeen("m80001", "r1", "maiden:a:r1:h:c", "i1", 20.0, None, **held)


def test_an_unanswered_click_replayed_in_time_is_a_violation() -> None:
    actor = SimpleNamespace(fake=SimpleNamespace(messages=lambda c: [],
                                                 ephemerals=lambda c: []), clicks=[])
    history = History()

    def found() -> list[int]:
        return [v.invariant for v in _clicks(actor, {}, {}, history)]  # type: ignore[arg-type]

    actor.clicks = [_prompt_click(held=True, replayed_in=1.2)]
    assert found() == [1]  # replayed with 1.8 s left, and no fault around: never answered
    history.events.append((19.5, "discord_resume", "op 7 RECONNECT, the RESUME held 1.5s"))
    assert found() == [1]  # the RESUME itself excuses nothing
    actor.clicks = [_prompt_click(held=True, replayed_in=2.4)]
    assert found() == []
    actor.clicks = [_prompt_click(held=True, said=NEVER_REPLAYED)]
    assert found() == []
    actor.clicks = [_prompt_click()]  # the same click live, unanswered: as before
    assert found() == [1]


def test_a_command_replayed_in_time_is_held_to_one_fitting_answer() -> None:
    made: list[dict[str, Any]] = []
    fake = SimpleNamespace(world=SimpleNamespace(bot_id="1"), messages=lambda c: [],
                           ephemerals=lambda c: made)
    click = ClickSeen("", "", "maiden", "9", 30.0, held=True, replayed_in=1.0)
    actor = SimpleNamespace(fake=fake, commands=[DiscordCommandSeen(
        DiscordCommand(30.0, "status", "h1", "ben"), "5", click=click)], stops=[])
    history = History()

    def found() -> list[str]:
        return [v.what for v in _commands(actor, history)]  # type: ignore[arg-type]

    (never,) = found()
    assert "never answered" in never
    click.replayed_in = 2.5
    assert found() == []  # Discord refused its callback: 10062
    click.replayed_in, click.answered = 1.0, 4
    made.append({"interaction_metadata": {"id": "9"}, "content": "Nothing is running here."})
    assert found() == []
    made.append(dict(made[0]))
    assert [w for w in found() if "answered (callback 4)" in w]  # twice: a violation


def test_a_message_held_for_a_resume_must_be_taken() -> None:
    people, sent, stored = _discord_seen({}, ["m80000"])
    people.live, people.handed_over = {}, False
    stored.runs.clear()
    stored.entries.clear()
    plan = make_plan(1, 30, "sqlite", 1)
    assert check_discord(plan, sent, stored, people) == []  # not live, not held: excused
    people.held = {"m80000"}
    (v,) = check_discord(plan, sent, stored, people)
    assert v.invariant == 6 and "while its RESUME was held" in v.what
    people.history.events.append((0.5, "kill", "r0"))
    assert check_discord(plan, sent, stored, people) == []  # the holder killed around it
