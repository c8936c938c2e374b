"""The soak's webhook sender (chaos/hooks.py): its deliveries are part of a seed's plan,
and its check finds a delivery run twice, a run for an unsigned one, and a run nobody sent."""

from __future__ import annotations

import random
from pathlib import Path

from chaos.hook_plan import HOOK, draw_hooks
from chaos.hooks import Hooks, hook_run
from chaos.invariants import Stored
from chaos.plan import Plan, make_plan
from chaos.schedules import Kept
from chaos.system import History
from runtime import Run, RunState
from schedules.hooks import hook_key


def test_deliveries_are_drawn_from_their_own_stream_and_replayed(tmp_path: Path) -> None:
    sends = draw_hooks(random.Random(3), 600, 3)
    assert len(sends) > 10 and any(s.again for s in sends) and any(s.unsigned for s in sends)
    plan = make_plan(7, 300, "postgres", 3)
    assert plan.hooks and plan.hooks == make_plan(7, 300, "postgres", 3).hooks
    path = tmp_path / "plan.json"
    plan.dump(path)
    assert Plan.load(path) == plan
    assert hook_run("hook:ci:abc") and not hook_run("schedule:x:manual:y")


def _run(run_id: str, key: str, reply: str = "answer to jhook.0: 1") -> Run:
    return Run(id=run_id, thread_id=f"hook:{HOOK}:{run_id}", text="t", idempotency_key=key,
               state=RunState.COMPLETED, reply=reply)


def test_the_check_holds_each_delivery_to_one_run_or_none() -> None:
    sends = draw_hooks(random.Random(5), 200, 1)
    hooks = Hooks(sends, 9, [], None, History())  # type: ignore[arg-type]
    signed = [s for s in hooks.sent.values() if not s.send.unsigned]
    unsigned = [s for s in hooks.sent.values() if s.send.unsigned]
    assert signed
    runs = []
    for i, sent in enumerate(signed):
        runs.append(_run(f"r{i}", hook_key(HOOK, sent.delivery)))
        sent.statuses, sent.run_ids = [202, 200], [f"r{i}", f"r{i}"]
    for sent in unsigned:
        sent.statuses = [401]
    stored = Stored(runs=[], entries={}, ledger=[], details={}, leases=[], live=set())
    assert hooks.check(stored, Kept(runs, [])) == []
    signed[0].run_ids = ["r0", "elsewhere"]  # a redelivery answered with another run
    nobody = _run("x", hook_key(HOOK, "not sent by the soak"))
    ticks = [{"tool": "tick", "applied": True, "run": "r1"}] * 2
    stored = Stored(runs=[], entries={}, ledger=ticks, details={}, leases=[], live=set())
    found = [v.what for v in hooks.check(stored, Kept([*runs, nobody], []))]
    assert any("answered with runs ['r0', 'elsewhere']" in w for w in found), found
    assert any("a hook run nobody sent" in w for w in found), found
    if len(runs) > 1:
        assert any("ticked 2 times" in w for w in found), found
