"""kill -9 at every named point, restart, and compare with a run that never crashed.

DESIGN §4 and §5: every thread ends in the same state as an uninterrupted run,
no inbound message is lost, no completed side effect is repeated, and a reply
is posted exactly once. Each case drives real processes (``tests/crash/driver.py``)
over one SQLite file; side effects are counted in the files the driver's test
tool and test channel write.

The matrix's cases are independent, so their processes run on a small thread
pool as soon as the first case asks (only the cases pytest selected); each test
then checks its own outcome.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime import idempotency_key
from tests.crash.driver import (
    CALLS_FILE,
    CHANNEL_FILE,
    EFFECTS,
    EFFECTS_FILE,
    KILL_POINTS,
    MAX_RECOVERY_ATTEMPTS,
    SCRIPT,
    read_lines,
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
THREAD = "crash:room-1"
TEXT = "please do the thing"
CALL_IDS = [f"call_0_{i}" for i in range(len(SCRIPT[0]["tool_calls"]))]

MID_RUN = ("after_user_entry", "after_intent", "after_claim", "in_tool_after_effect",
           "after_tool_result")
"""Points where the run is unfinished when the process dies: the restart recovers it."""

RUN_FIELDS = ("state", "reason", "text", "origin", "reply", "error", "turns", "tool_calls",
              "usage", "started_calls", "pending_approval", "decisions")
"""What must match the uninterrupted run (ids, owners and clocks may differ)."""

Case = tuple[str, str, int]
"""(effect class, kill point, kill at its Nth occurrence)"""


def _applies(effect: str, point: str) -> bool:
    # Only non_idempotent calls are claimed before they run.
    return point != "after_claim" or effect.startswith("non_idempotent")


def _cases() -> list[Case]:
    cases = [(effect, point, 1) for effect in EFFECTS for point in KILL_POINTS
             if _applies(effect, point)]
    # The turn has two calls: also die on the second one, the first one's result recorded.
    cases += [(effect, point, 2) for effect in EFFECTS
              for point in ("after_claim", "in_tool_after_effect", "after_tool_result")
              if _applies(effect, point)]
    return cases


CASES = _cases()


def _case_id(case: Case) -> str:
    effect, point, count = case
    return f"{effect}-{point}" + (f"#{count}" if count > 1 else "")


def _pauses(effect: str, point: str) -> bool:
    """A non_idempotent call without a reconcile hook, cut off after its claim, needs a person."""
    return effect == "non_idempotent" and point in ("after_claim", "in_tool_after_effect")


# -- driving processes -----------------------------------------------------------------------


def _tail(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


@dataclass(frozen=True)
class Drill:
    """One store and one set of trace files, driven by successive driver processes."""

    root: Path
    effect: str
    requires_approval: bool = False

    def run(self, *args: str) -> dict[str, Any]:
        """Run the driver to its end; return its summary."""
        proc = self._spawn(args)
        assert proc.returncode == 0, f"driver {args} exited {proc.returncode}:\n" \
            f"{_tail(proc.stderr)}"
        summary: dict[str, Any] = json.loads(proc.stdout)
        return summary

    def kill(self, *args: str) -> None:
        """Run the driver; it must die of SIGKILL at the kill point it was given."""
        proc = self._spawn(args)
        assert proc.returncode == -signal.SIGKILL, (
            f"driver {args} was expected to be killed but exited {proc.returncode}:\n"
            f"{_tail(proc.stderr)}\n{_tail(proc.stdout)}")

    def _spawn(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tests.crash.driver", "--db", str(self.root / "maiden.db"),
                   "--effect", self.effect, "--workdir", str(self.root / "traces"), *args]
        if self.requires_approval:
            command.append("--requires-approval")
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)

    def invocations(self) -> Counter[str]:
        """How many times the tool ran, per idempotency key."""
        return Counter(line["key"] for line in read_lines(self.root / "traces" / CALLS_FILE))

    def effects(self) -> Counter[str]:
        """How many times the tool's effect was applied, per idempotency key."""
        return Counter(line["key"] for line in read_lines(self.root / "traces" / EFFECTS_FILE))

    def channel(self) -> list[dict[str, Any]]:
        """Every message posted to the test channel."""
        return read_lines(self.root / "traces" / CHANNEL_FILE)


@dataclass(frozen=True)
class Outcome:
    drill: Drill
    summary: dict[str, Any]

    @property
    def run(self) -> dict[str, Any]:
        (run,) = self.summary["runs"]
        return run  # type: ignore[no-any-return]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return self.summary["threads"][THREAD]  # type: ignore[no-any-return]

    def keys(self) -> list[str]:
        return [idempotency_key(self.run["id"], call_id) for call_id in CALL_IDS]


def _baseline(root: Path, effect: str) -> Outcome:
    drill = Drill(root, effect)
    done = drill.run("--send", THREAD, TEXT)
    # A restart after a clean finish finds nothing to do and changes nothing.
    assert drill.run("--recover") == done
    return Outcome(drill, done)


def _crash_and_recover(root: Path, case: Case) -> Outcome:
    effect, point, count = case
    drill = Drill(root, effect)
    drill.kill("--send", THREAD, TEXT, "--kill-at", point, "--kill-count", str(count))
    return Outcome(drill, drill.run("--recover"))


def _chain(effect: str) -> list[str]:
    """Kill points for successive processes: each restart dies somewhere further on."""
    if effect == "non_idempotent":  # dying inside its call would hand it to a person
        return ["after_user_entry", "after_intent", "after_tool_result", "after_final_answer",
                "after_delivery_sent"]
    return ["after_intent", "in_tool_after_effect", "after_tool_result", "after_final_answer",
            "after_delivery_sent"]


def _crash_again_and_again(root: Path, effect: str) -> Outcome:
    drill = Drill(root, effect)
    first, *then = _chain(effect)
    drill.kill("--send", THREAD, TEXT, "--kill-at", first)
    for point in then:
        drill.kill("--recover", "--kill-at", point)
    return Outcome(drill, drill.run("--recover"))


PREFETCHED: dict[str, Callable[[Path, Any], Outcome]] = {
    "test_crash_matrix": _crash_and_recover,
    "test_crash_again_during_recovery": _crash_again_and_again}
"""Tests whose processes are started together, on the pool, when the first one asks."""


@pytest.fixture(scope="module")
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    yield executor
    executor.shutdown(cancel_futures=True)


@pytest.fixture(scope="module")
def baselines(
    pool: ThreadPoolExecutor, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Future[Outcome]]:
    return {effect: pool.submit(_baseline, tmp_path_factory.mktemp(f"baseline-{effect}"), effect)
            for effect in EFFECTS}


@pytest.fixture(scope="module")
def prefetched(
    request: pytest.FixtureRequest,
    pool: ThreadPoolExecutor,
    baselines: dict[str, Future[Outcome]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Future[Outcome]]:
    """Start the processes of every selected prefetched test at once, by test name."""
    futures: dict[str, Future[Outcome]] = {}
    for item in request.session.items:
        scenario = PREFETCHED.get(getattr(item, "originalname", ""))
        if scenario is None or getattr(item, "module", None) is not request.module:
            continue
        root = tmp_path_factory.mktemp(re.sub(r"[^\w.-]+", "_", item.name)[:60])
        case = item.callspec.params["case"]  # type: ignore[attr-defined]
        futures[item.name] = pool.submit(scenario, root, case)
    return futures


def outcome_of(request: pytest.FixtureRequest, prefetched: dict[str, Future[Outcome]]) -> Outcome:
    return prefetched[request.node.name].result(timeout=TIMEOUT_S * 3)


# -- comparing with the uninterrupted run ----------------------------------------------------


def _normalise(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_normalise(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v, names) for k, v in value.items()}
    return value


def comparable_entries(outcome: Outcome) -> list[dict[str, Any]]:
    """The thread's entries with ids, keys and clocks replaced by what they stand for."""
    run_id = outcome.run["id"]
    names = {run_id: "<run>", idempotency_key(run_id, "delivery"): "<delivery key>"}
    names.update({idempotency_key(run_id, c): f"<key of {c}>" for c in CALL_IDS})
    return [_normalise({k: v for k, v in entry.items() if k != "at"}, names)
            for entry in outcome.entries]


def comparable_run(outcome: Outcome) -> dict[str, Any]:
    return {field: outcome.run[field] for field in RUN_FIELDS}


def reasons(run: dict[str, Any]) -> list[str]:
    return [t["reason"] for t in run["transitions"]]


def assert_delivered_once(outcome: Outcome) -> None:
    run = outcome.run
    posted = [m for m in outcome.drill.channel() if m["run_id"] == run["id"]]
    assert len(posted) == 1, f"the reply was posted {len(posted)} times: {posted}"
    (message,) = posted
    assert message["text"] == run["reply"] == "done"
    assert message["target"] == {"room": "r1"}
    assert message["key"] == idempotency_key(run["id"], "delivery")
    (record,) = outcome.summary["deliveries"]
    assert record["remote_id"] == message["id"], "the posted message's id was not recorded"


# -- the tests -------------------------------------------------------------------------------


def test_baseline_is_what_the_matrix_compares_with(
    baselines: dict[str, Future[Outcome]],
) -> None:
    """The uninterrupted run: two calls, each run once, one reply, no recovery."""
    for effect, future in baselines.items():
        base = future.result(timeout=TIMEOUT_S * 3)
        assert [e["kind"] for e in base.entries] == ["user", "assistant", "tool_result",
                                                     "tool_result", "assistant"], effect
        assert base.run["state"] == "completed" and base.run["recovery_attempts"] == 0
        assert reasons(base.run) == ["started", "tool calls requested",
                                     "tool results recorded", "answered"]
        results = comparable_entries(base)[2:4]
        assert [r["content"] for r in results] == [
            {"n": 1, "key": "<key of call_0_0>", "ok": True},
            {"n": 2, "key": "<key of call_0_1>", "ok": True}]
        assert base.drill.invocations() == Counter(base.keys())
        expected_effects = Counter() if effect == "read_only" else Counter(base.keys())
        assert base.drill.effects() == expected_effects
        assert_delivered_once(base)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_crash_matrix(
    case: Case,
    request: pytest.FixtureRequest,
    prefetched: dict[str, Future[Outcome]],
    baselines: dict[str, Future[Outcome]],
) -> None:
    effect, point, count = case
    outcome = outcome_of(request, prefetched)
    base = baselines[effect].result(timeout=TIMEOUT_S * 3)
    run, drill = outcome.run, outcome.drill
    keys = outcome.keys()
    cut = count - 1  # index of the call the kill point hit (for the per-call points)

    # No inbound message is lost, whenever the process died.
    assert outcome.entries[0]["kind"] == "user" and outcome.entries[0]["text"] == TEXT

    if point in MID_RUN:
        assert run["recovery_attempts"] == 1
        assert reasons(run).count("recovered after crash (attempt 1)") == 1, reasons(run)
    else:
        assert run["recovery_attempts"] == 0
        assert not any(r.startswith("recovered after crash") for r in reasons(run))

    if _pauses(effect, point):
        # The effect may or may not have happened: a person must decide, nothing re-runs it.
        assert run["state"] == "awaiting_approval", run
        pending = run["pending_approval"]
        assert pending["reason"] == "uncertain_side_effect"
        assert pending["tool_call_id"] == CALL_IDS[cut]
        assert run["started_calls"] == [CALL_IDS[cut]]
        happened = 1 if point == "in_tool_after_effect" else 0
        expected = Counter({**{k: 1 for k in keys[:cut]}, keys[cut]: happened})
        assert drill.effects() == expected
        assert drill.invocations() == expected
        assert drill.channel() == [] and outcome.summary["deliveries"] == []
        return

    assert run["state"] == "completed", run
    assert comparable_entries(outcome) == comparable_entries(base)
    assert comparable_run(outcome) == comparable_run(base)
    assert reasons(run)[-1] == "answered"
    assert_delivered_once(outcome)

    rerun = Counter({keys[cut]: 1}) if point == "in_tool_after_effect" else Counter()
    if effect == "read_only":
        # Re-running a read is allowed; its result is still recorded once (entries above).
        assert drill.invocations() == Counter(keys) + rerun
        assert drill.effects() == Counter()
    elif effect == "idempotent_write":
        # Re-run with the same idempotency key: the API applies it once.
        assert drill.invocations() == Counter(keys) + rerun
        assert drill.effects() == Counter(keys)
    else:
        # Never re-run blindly: the claim (and the reconcile hook) keep it to once.
        assert drill.invocations() == Counter(keys)
        assert drill.effects() == Counter(keys)
        assert run["decisions"] == []  # and no person was needed


@pytest.mark.parametrize("approve", [False, True], ids=["deny", "approve"])
@pytest.mark.parametrize("point", ["in_tool_after_effect", "after_claim"])
def test_a_person_decides_an_uncertain_call(tmp_path: Path, point: str, approve: bool) -> None:
    drill = Drill(tmp_path, "non_idempotent")
    drill.kill("--send", THREAD, TEXT, "--kill-at", point)
    paused = Outcome(drill, drill.run("--recover"))
    run = paused.run
    assert run["state"] == "awaiting_approval"
    assert run["pending_approval"]["reason"] == "uncertain_side_effect"
    call_id = run["pending_approval"]["tool_call_id"]
    assert call_id == CALL_IDS[0]

    ended = Outcome(drill, drill.run("--approve" if approve else "--deny", run["id"], call_id))
    run = ended.run
    assert run["state"] == "completed" and run["reply"] == "done"
    assert [(d["tool_call_id"], d["approve"], d["by"]) for d in run["decisions"]] == [
        (call_id, approve, "crash-test")]
    first, second = ended.keys()
    happened = 1 if point == "in_tool_after_effect" else 0
    # Approving runs the call again: twice, if it had happened, is what the person chose.
    assert ended.drill.effects() == Counter({first: happened + approve, second: 1})
    result = next(e for e in ended.entries
                  if e["kind"] == "tool_result" and e["tool_call_id"] == call_id)
    if approve:
        assert result["content"] == {"n": 1, "key": first, "ok": True}
    else:
        assert result["is_error"] and result["content"]["error"]["type"] == "denied"
    assert [e["kind"] for e in ended.entries] == ["user", "assistant", "tool_result",
                                                  "tool_result", "assistant"]
    assert_delivered_once(ended)


def test_a_run_that_kills_every_process_becomes_poison(tmp_path: Path) -> None:
    """A run that takes the process down on every start is failed, not crash-looped."""
    drill = Drill(tmp_path, "read_only")
    kill = ("--kill-at", "in_tool_after_effect")
    drill.kill("--send", THREAD, TEXT, *kill)
    for _ in range(MAX_RECOVERY_ATTEMPTS):
        drill.kill("--recover", *kill)
    ended = Outcome(drill, drill.run("--recover", *kill))
    run = ended.run
    assert run["state"] == "failed" and run["reason"] == "poison_run", run
    assert run["recovery_attempts"] == MAX_RECOVERY_ATTEMPTS
    assert "giving up" in run["error"]
    assert [r for r in reasons(run) if r.startswith("recovered")] == [
        f"recovered after crash (attempt {i})" for i in range(1, MAX_RECOVERY_ATTEMPTS + 1)]
    first, _ = ended.keys()
    # One start with the message, three recoveries; the fourth restart ran nothing.
    assert drill.invocations() == Counter({first: 1 + MAX_RECOVERY_ATTEMPTS})
    # The history stays valid: every call of the turn has a result.
    results = [e for e in ended.entries if e["kind"] == "tool_result"]
    assert [(r["tool_call_id"], r["content"]["error"]["type"]) for r in results] == [
        (c, "cancelled") for c in CALL_IDS]
    assert run["started_calls"] == []
    assert drill.channel() == []


@pytest.mark.parametrize("case", EFFECTS)
def test_crash_again_during_recovery(
    case: str,
    request: pytest.FixtureRequest,
    prefetched: dict[str, Future[Outcome]],
    baselines: dict[str, Future[Outcome]],
) -> None:
    """Every restart dies further on (up to the poison limit); the last one finishes."""
    effect = case
    outcome = outcome_of(request, prefetched)
    base = baselines[effect].result(timeout=TIMEOUT_S * 3)
    run, drill = outcome.run, outcome.drill
    assert run["state"] == "completed", run
    assert comparable_entries(outcome) == comparable_entries(base)
    assert comparable_run(outcome) == comparable_run(base)
    # Three processes died with the run unfinished, so three recoveries.
    assert run["recovery_attempts"] == MAX_RECOVERY_ATTEMPTS
    assert_delivered_once(outcome)
    keys = outcome.keys()
    rerun = Counter({keys[0]: 1}) if effect in ("read_only", "idempotent_write") else Counter()
    assert drill.invocations() == Counter(keys) + rerun
    assert drill.effects() == (Counter() if effect == "read_only" else Counter(keys))


def test_a_redelivered_inbound_message_is_one_run(tmp_path: Path) -> None:
    """The process died before the channel got its ack, so the channel sends the message
    again with the same key: one run, answered once."""
    drill = Drill(tmp_path, "idempotent_write")
    drill.kill("--send", THREAD, TEXT, "--key", "event-1", "--kill-at", "after_queued")
    outcome = Outcome(drill, drill.run("--send", THREAD, TEXT, "--key", "event-1"))
    run = outcome.run  # exactly one run
    assert run["state"] == "completed" and run["idempotency_key"] == "event-1"
    assert [e["kind"] for e in outcome.entries] == ["user", "assistant", "tool_result",
                                                    "tool_result", "assistant"]
    assert drill.effects() == Counter(outcome.keys())
    assert_delivered_once(outcome)


@pytest.mark.parametrize("point", ["in_tool_after_effect", "after_claim"])
def test_an_approved_call_cut_off_asks_again(tmp_path: Path, point: str) -> None:
    """An approval lets the effect happen once: a crash while the approved call runs makes it
    uncertain again, and it is not re-run without a new decision."""
    drill = Drill(tmp_path, "non_idempotent")
    drill.kill("--send", THREAD, TEXT, "--kill-at", "in_tool_after_effect")
    run = Outcome(drill, drill.run("--recover")).run
    call_id = run["pending_approval"]["tool_call_id"]
    drill.kill("--approve", run["id"], call_id, "--kill-at", point)
    asked = Outcome(drill, drill.run("--recover"))
    run = asked.run
    assert run["state"] == "awaiting_approval", run
    assert run["pending_approval"]["reason"] == "uncertain_side_effect"
    assert run["pending_approval"]["tool_call_id"] == call_id
    first, _ = asked.keys()
    before = 2 if point == "in_tool_after_effect" else 1
    assert drill.effects() == Counter({first: before})
    ended = Outcome(drill, drill.run("--deny", run["id"], call_id))
    assert ended.run["state"] == "completed"
    assert drill.effects() == Counter({first: before, ended.keys()[1]: 1})
    assert_delivered_once(ended)


@pytest.mark.parametrize("effect", ["non_idempotent", "non_idempotent_reconcile"])
def test_a_call_that_needed_approval_is_not_rerun_after_a_crash(
    tmp_path: Path, effect: str
) -> None:
    """requires_approval: approved once, died after the effect; the restart must not run it
    again on the old approval. With a reconcile hook it finds the effect; without, it asks."""
    drill = Drill(tmp_path, effect, requires_approval=True)
    run = Outcome(drill, drill.run("--send", THREAD, TEXT)).run
    assert run["state"] == "awaiting_approval"
    assert run["pending_approval"]["reason"] == "requires_approval"
    call_id = run["pending_approval"]["tool_call_id"]
    drill.kill("--approve", run["id"], call_id, "--kill-at", "in_tool_after_effect")
    after = Outcome(drill, drill.run("--recover"))
    first, _ = after.keys()
    assert drill.effects() == Counter({first: 1})
    if effect == "non_idempotent":
        assert after.run["state"] == "awaiting_approval"
        assert after.run["pending_approval"]["reason"] == "uncertain_side_effect"
    else:
        # The reconciled call is done; the second call needs its own approval.
        assert after.run["state"] == "awaiting_approval"
        assert after.run["pending_approval"]["reason"] == "requires_approval"
        assert after.run["pending_approval"]["tool_call_id"] == CALL_IDS[1]
        result = next(e for e in after.entries if e["kind"] == "tool_result")
        assert result["tool_call_id"] == call_id
        assert result["content"] == {"n": 1, "key": first, "ok": True}
