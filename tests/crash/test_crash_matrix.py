"""kill -9 at every named point, restart, and compare with a run that never crashed.

DESIGN §4 and §5: every thread ends in the same state as an uninterrupted run,
no inbound message is lost, no completed side effect is repeated, and a reply
is posted exactly once. Each case drives real processes (``tests/crash/driver.py``)
over one SQLite file (or one files store, for a subset of the matrix); side effects are
counted in the files the driver's test tool and test channel write.

Every test's processes are independent of every other test's, so each test
names a scenario (``SCENARIOS``) and all the selected tests' scenarios start on
a small thread pool as soon as the first of them asks; each test then checks
its own outcome. The driver's processes are CPU-bound (~0.2 s each, forked with their
imports done: tests/crash/launch.py), so this is what keeps some 110 of them near a quarter
of a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from runtime.model.runs import idempotency_key
from tests.crash import launch
from tests.crash.driver import (
    CHANNEL_FILE,
    EFFECTS,
    KILL_POINTS,
    MAX_RECOVERY_ATTEMPTS,
    REQUESTS_FILE,
    read_lines,
)
from tests.crash.outcome import CALL_IDS, Traces, normalise, tail

# Its own xdist group: the module's first test starts every selected scenario at once
# (``started``, from the session's items), so on several workers each would run them all.
pytestmark = pytest.mark.xdist_group("crash_matrix")

TIMEOUT_S = 60
THREAD = "crash:room-1"
TEXT = "please do the thing"
AFTER_POISON = "and now something else"

MID_RUN = ("after_user_entry", "after_intent", "in_model_call", "after_claim",
           "in_tool_after_effect", "after_tool_result")
"""Points where the run is unfinished when the process dies: the restart recovers it (its
start is committed before the model is first asked, DESIGN §3)."""

RUN_FIELDS = ("state", "reason", "text", "origin", "reply", "error", "turns", "tool_calls",
              "usage", "started_calls", "pending_approval", "decisions")
"""What must match the uninterrupted run (ids, owners and clocks may differ)."""

Case = tuple[str, str, int]
"""(effect class, kill point, kill at its Nth occurrence)"""


def _applies(effect: str, point: str) -> bool:
    # Only non_idempotent calls are claimed before they run; nothing pauses without approval.
    return (point != "after_claim" or effect.startswith("non_idempotent")) \
        and point != "after_pause"


def _cases() -> list[Case]:
    cases = [(effect, point, 1) for effect in EFFECTS for point in KILL_POINTS
             if _applies(effect, point)]
    # Every model request of the run (the turn, then the answer with both results
    # recorded) and every tool result: the turn has two calls, so also die on the second
    # one, the first one's result recorded.
    cases += [(effect, point, 2) for effect in EFFECTS
              for point in ("after_claim", "in_tool_after_effect", "after_tool_result",
                            "in_model_call")
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


@dataclass(frozen=True)
class Outcome(Traces):
    """What one driver process left behind: its summary and the side-effect traces so far."""

    channel: list[dict[str, Any]]
    """Every message posted to the test channel."""
    requests: list[dict[str, Any]]
    """Every request made of the model, as the OpenAI wire sends it."""

    @property
    def replies(self) -> list[dict[str, Any]]:
        return [m for m in self.channel if m["kind"] == "reply"]

    @property
    def prompts(self) -> list[dict[str, Any]]:
        return [m for m in self.channel if m["kind"] == "approval"]


@dataclass(frozen=True)
class Drill:
    """One store and one set of trace files, driven by successive driver processes."""

    root: Path
    effect: str
    requires_approval: bool = False
    store: str = "sqlite"

    def run(self, *args: str) -> Outcome:
        """Run the driver to its end; return what it left."""
        proc = self._spawn(args)
        assert proc.returncode == 0, f"driver {args} exited {proc.returncode}:\n" \
            f"{tail(proc.stderr)}"
        traces = self.root / "traces"
        return Outcome(**Traces.read(json.loads(proc.stdout), traces),
                       channel=read_lines(traces / CHANNEL_FILE),
                       requests=read_lines(traces / REQUESTS_FILE))

    def kill(self, *args: str) -> None:
        """Run the driver; it must die of SIGKILL at the kill point it was given."""
        proc = self._spawn(args)
        assert proc.returncode == -signal.SIGKILL, (
            f"driver {args} was expected to be killed but exited {proc.returncode}:\n"
            f"{tail(proc.stderr)}\n{tail(proc.stdout)}")

    def _spawn(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        db = self.root / ("files" if self.store == "files" else "maiden.db")
        command = ["--db", str(db), "--store", self.store, "--effect", self.effect,
                   "--workdir", str(self.root / "traces"), *args]
        if self.requires_approval:
            command.append("--requires-approval")
        return launch.run(*command, timeout=TIMEOUT_S)


# -- scenarios: the processes of one test, returning the outcome of each that ended ----------

Steps = list[Outcome]


def _baseline(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    return [drill.run("--send", THREAD, TEXT), drill.run("--recover")]


def _crash_and_recover(root: Path, case: Case, store: str = "sqlite") -> Steps:
    effect, point, count = case
    drill = Drill(root, effect, store=store)
    drill.kill("--send", THREAD, TEXT, "--kill-at", point, "--kill-count", str(count))
    return [drill.run("--recover")]


def _chain(effect: str) -> list[str]:
    """Kill points for successive processes: each restart dies somewhere further on."""
    if effect == "non_idempotent":  # dying inside its call would hand it to a person
        # (Its start is written with its intent: one commit, so one point of the two.)
        return ["after_intent", "after_tool_result", "after_tool_result", "after_final_answer",
                "after_delivery_sent"]
    return ["after_intent", "in_tool_after_effect", "after_tool_result", "after_final_answer",
            "after_delivery_sent"]


def _crash_again_and_again(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    first, *then = _chain(effect)
    drill.kill("--send", THREAD, TEXT, "--kill-at", first)
    for point in then:
        drill.kill("--recover", "--kill-at", point)
    return [drill.run("--recover")]


def _person_decides(root: Path, case: tuple[str, bool]) -> Steps:
    point, approve = case
    drill = Drill(root, "non_idempotent")
    drill.kill("--send", THREAD, TEXT, "--kill-at", point)
    paused = drill.run("--recover")
    decision = "--approve" if approve else "--deny"
    return [paused, drill.run(decision, paused.run["id"], paused.pending_call)]


def _poison(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    kill = ("--kill-at", "in_tool_after_effect")
    drill.kill("--send", THREAD, TEXT, *kill)
    for _ in range(MAX_RECOVERY_ATTEMPTS):
        drill.kill("--recover", *kill)
    ended = drill.run("--recover", *kill)
    return [ended, drill.run("--send", THREAD, AFTER_POISON)]


def _poison_in_the_model(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    kill = ("--kill-at", "in_model_call")
    drill.kill("--send", THREAD, TEXT, *kill)  # its start is on record: recovered from then
    for _ in range(MAX_RECOVERY_ATTEMPTS):
        drill.kill("--recover", *kill)
    ended = drill.run("--recover", *kill)
    return [ended, drill.run("--send", THREAD, AFTER_POISON)]


@dataclass(frozen=True)
class Traced(Outcome):
    """An outcome with the spans every process of the drill exported (one JSON each)."""

    spans: tuple[dict[str, Any], ...] = ()


def _traced(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    path = root / "spans.jsonl"
    drill.kill("--send", THREAD, TEXT, "--kill-at", "in_tool_after_effect",
               "--trace-file", str(path))
    ended = drill.run("--recover", "--trace-file", str(path))
    spans = tuple(json.loads(line) for line in path.read_text().splitlines())
    return [Traced(**{f.name: getattr(ended, f.name) for f in fields(ended)}, spans=spans)]


def _redelivered(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect)
    drill.kill("--send", THREAD, TEXT, "--key", "event-1", "--kill-at", "after_queued")
    return [drill.run("--send", THREAD, TEXT, "--key", "event-1")]


def _approved_then_cut_off(root: Path, point: str) -> Steps:
    drill = Drill(root, "non_idempotent")
    drill.kill("--send", THREAD, TEXT, "--kill-at", "in_tool_after_effect")
    paused = drill.run("--recover")
    run_id, call_id = paused.run["id"], paused.pending_call
    drill.kill("--approve", run_id, call_id, "--kill-at", point)
    asked = drill.run("--recover")
    return [paused, asked, drill.run("--deny", run_id, asked.pending_call)]


def _approval_then_crash(root: Path, effect: str) -> Steps:
    drill = Drill(root, effect, requires_approval=True)
    asked = drill.run("--send", THREAD, TEXT)
    drill.kill("--approve", asked.run["id"], asked.pending_call,
               "--kill-at", "in_tool_after_effect")
    return [asked, drill.run("--recover")]


def _prompt_then_crash(root: Path, case: tuple[str, str]) -> Steps:
    point, store = case
    drill = Drill(root, "non_idempotent", requires_approval=True, store=store)
    drill.kill("--send", THREAD, TEXT, "--kill-at", point)
    paused = drill.run("--recover")
    return [paused, drill.run("--approve", paused.run["id"], paused.pending_call)]


SCENARIOS: dict[str, Callable[[Path, Any], Steps]] = {
    "test_crash_matrix": _crash_and_recover,
    "test_crash_matrix_on_the_files_store": lambda root, case: _crash_and_recover(
        root, case, store="files"),
    "test_crash_again_during_recovery": _crash_again_and_again,
    "test_a_person_decides_an_uncertain_call": _person_decides,
    "test_a_run_that_kills_every_process_becomes_poison": _poison,
    "test_a_run_that_dies_as_the_model_is_asked_becomes_poison": _poison_in_the_model,
    "test_a_run_recovered_after_a_kill_keeps_its_trace": _traced,
    "test_a_redelivered_inbound_message_is_one_run": _redelivered,
    "test_an_approved_call_cut_off_asks_again": _approved_then_cut_off,
    "test_a_call_that_needed_approval_is_not_rerun_after_a_crash": _approval_then_crash,
    "test_an_approval_prompt_survives_a_crash": _prompt_then_crash,
}
"""Each test here is parametrized by ``case`` and checks what its scenario's processes did."""


@pytest.fixture(scope="module")
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=min(4, max(2, os.cpu_count() or 2)))
    yield executor
    executor.shutdown(cancel_futures=True)


@pytest.fixture(scope="module")
def baselines(
    pool: ThreadPoolExecutor, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Future[Steps]]:
    return {effect: pool.submit(_baseline, tmp_path_factory.mktemp(f"baseline-{effect}"), effect)
            for effect in EFFECTS}


@pytest.fixture(scope="module")
def started(
    request: pytest.FixtureRequest,
    pool: ThreadPoolExecutor,
    baselines: dict[str, Future[Steps]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Future[Steps]]:
    """The scenarios of every selected test of this module, all submitted at once."""
    futures: dict[str, Future[Steps]] = {}
    for item in request.session.items:
        scenario = SCENARIOS.get(getattr(item, "originalname", ""))
        if scenario is None or getattr(item, "module", None) is not request.module:
            continue
        root = tmp_path_factory.mktemp(re.sub(r"[^\w.-]+", "_", item.name)[:60])
        case = item.callspec.params["case"]  # type: ignore[attr-defined]
        futures[item.name] = pool.submit(scenario, root, case)
    return futures


@pytest.fixture
def scenario(request: pytest.FixtureRequest, started: dict[str, Future[Steps]]) -> Future[Steps]:
    """This test's scenario (wait for it with ``finished``, in the test: its errors are the
    test's failures)."""
    return started[request.node.name]


def finished(scenario: Future[Steps]) -> Steps:
    return scenario.result(timeout=TIMEOUT_S * 3)


@pytest.fixture
def baseline(request: pytest.FixtureRequest, baselines: dict[str, Future[Steps]]) -> Outcome:
    """The uninterrupted run with this test's effect class."""
    case = request.node.callspec.params["case"]
    effect = case if isinstance(case, str) else case[0]
    return baselines[effect].result(timeout=TIMEOUT_S * 3)[0]


# -- comparing with the uninterrupted run ----------------------------------------------------


def comparable_entries(outcome: Outcome) -> list[dict[str, Any]]:
    """The thread's entries with ids, keys and clocks replaced by what they stand for."""
    run_id = outcome.run["id"]
    names = {run_id: "<run>", idempotency_key(run_id, "delivery"): "<delivery key>"}
    names.update({idempotency_key(run_id, c): f"<key of {c}>" for c in CALL_IDS})
    return [normalise({k: v for k, v in entry.items() if k != "at"}, names)
            for entry in outcome.entries]


def comparable_run(outcome: Outcome) -> dict[str, Any]:
    return {field: outcome.run[field] for field in RUN_FIELDS}


def reasons(run: dict[str, Any]) -> list[str]:
    return [t["reason"] for t in run["transitions"]]


def assert_delivered_once(outcome: Outcome) -> None:
    run = outcome.run
    posted = [m for m in outcome.replies if m["run_id"] == run["id"]]
    assert len(posted) == 1, f"the reply was posted {len(posted)} times: {posted}"
    (message,) = posted
    assert message["text"] == run["reply"] == "done"
    assert message["target"] == {"room": "r1"}
    (record,) = [d for d in outcome.summary["deliveries"] if d["kind"] == "reply"]
    assert message["key"] == record["key"], "the posted message does not carry the record's key"
    assert record["remote_id"] == message["id"], "the posted message's id was not recorded"


def assert_prompted_once(outcome: Outcome, call_id: str, prompts: int = 1) -> None:
    """The approval prompt for ``call_id`` was posted once (of ``prompts`` in all so far)."""
    assert len(outcome.prompts) == prompts, outcome.prompts
    message = outcome.prompts[-1]
    assert message["tool_call_id"] == call_id and message["target"] == {"room": "r1"}
    records = [d for d in outcome.summary["deliveries"] if d["kind"] == "approval"]
    assert len(records) == prompts
    record = next(d for d in records if d["key"] == message["key"])
    assert record["tool_call_id"] == call_id and record["remote_id"] == message["id"]


# -- the tests -------------------------------------------------------------------------------

KINDS = ["user", "assistant", "tool_result", "tool_result", "assistant"]


@pytest.mark.parametrize("effect", EFFECTS)
def test_baseline_is_what_the_matrix_compares_with(
    effect: str, baselines: dict[str, Future[Steps]]
) -> None:
    """The uninterrupted run: two calls, each run once, one reply, no recovery; and a restart
    after it finds nothing to do and changes nothing."""
    base, restarted = baselines[effect].result(timeout=TIMEOUT_S * 3)
    assert [e["kind"] for e in base.entries] == KINDS
    assert base.run["state"] == "completed" and base.run["recovery_attempts"] == 0
    assert reasons(base.run) == ["started", "tool calls requested", "tool results recorded",
                                 "answered"]
    assert [r["content"] for r in comparable_entries(base)[2:4]] == [
        {"n": 1, "key": "<key of call_0_0>", "ok": True},
        {"n": 2, "key": "<key of call_0_1>", "ok": True}]
    assert base.invocations == Counter(base.keys())
    assert base.effects == (Counter() if effect == "read_only" else Counter(base.keys()))
    assert_delivered_once(base)
    assert restarted == base


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_crash_matrix(case: Case, scenario: Future[Steps], baseline: Outcome) -> None:
    """Killed once at ``point``, restarted: the same end as without the crash."""
    (outcome,) = finished(scenario)
    check_recovered(case, outcome, baseline)


FILES_CASES = [case for case in CASES
               if (case[0] in ("idempotent_write", "non_idempotent") and case[2] == 1)
               or case[1] in ("in_model_call", "after_tool_result")]
"""On the files store: every point for a call with an effect, and for every effect class
every model request and every tool result (the points where a round must be on record)."""


@pytest.mark.parametrize("case", FILES_CASES, ids=[_case_id(c) for c in FILES_CASES])
def test_crash_matrix_on_the_files_store(
    case: Case, scenario: Future[Steps], baseline: Outcome
) -> None:
    """The same guarantee with the files store (compared with the SQLite baseline)."""
    (outcome,) = finished(scenario)
    check_recovered(case, outcome, baseline)


def _mid_run(point: str) -> bool:
    """Whether the run is unfinished in the store when the process dies at ``point`` (and
    so is recovered, not started afresh)."""
    return point in MID_RUN


def check_recovered(case: Case, outcome: Outcome, baseline: Outcome) -> None:
    effect, point, count = case
    run = outcome.run
    keys = outcome.keys()
    cut = count - 1  # index of the call the kill point hit (for the per-call points)

    # No inbound message is lost, whenever the process died.
    assert outcome.entries[0]["kind"] == "user" and outcome.entries[0]["text"] == TEXT

    if _mid_run(point):
        assert run["recovery_attempts"] == 1
        assert reasons(run).count("recovered after crash (attempt 1)") == 1, reasons(run)
    else:
        assert run["recovery_attempts"] == 0
        assert not any(r.startswith("recovered after crash") for r in reasons(run))

    if _pauses(effect, point):
        # The effect may or may not have happened: a person must decide, nothing re-runs it.
        assert run["state"] == "awaiting_approval", run
        assert run["pending_approval"]["reason"] == "uncertain_side_effect"
        assert outcome.pending_call == CALL_IDS[cut]
        assert run["started_calls"] == [CALL_IDS[cut]]
        happened = 1 if point == "in_tool_after_effect" else 0
        expected = Counter({**{k: 1 for k in keys[:cut]}, keys[cut]: happened})
        assert outcome.effects == expected
        assert outcome.invocations == expected
        assert outcome.replies == []
        assert_prompted_once(outcome, CALL_IDS[cut])
        return

    assert run["state"] == "completed", run
    assert comparable_entries(outcome) == comparable_entries(baseline)
    assert comparable_run(outcome) == comparable_run(baseline)
    assert reasons(run)[-1] == "answered"
    assert_delivered_once(outcome)

    # Only the call cut off inside the tool, with no result recorded, runs again; a call
    # whose result was committed never does, whatever its effect class.
    rerun = Counter({keys[cut]: 1}) if point == "in_tool_after_effect" else Counter()
    if effect == "read_only":
        assert outcome.invocations == Counter(keys) + rerun
        assert outcome.effects == Counter()
    elif effect == "idempotent_write":
        # Re-run with the same idempotency key: the API applies it once.
        assert outcome.invocations == Counter(keys) + rerun
        assert outcome.effects == Counter(keys)
    else:
        # Never re-run blindly: the claim (and the reconcile hook) keep it to once,
        # and no person was needed.
        assert outcome.invocations == Counter(keys)
        assert outcome.effects == Counter(keys)
        assert run["decisions"] == []


@pytest.mark.parametrize("case", EFFECTS)
def test_crash_again_during_recovery(case: str, scenario: Future[Steps], baseline: Outcome) -> None:
    """Every restart dies further on (up to the poison limit); the last one finishes."""
    effect = case
    (outcome,) = finished(scenario)
    run = outcome.run
    assert run["state"] == "completed", run
    assert comparable_entries(outcome) == comparable_entries(baseline)
    assert comparable_run(outcome) == comparable_run(baseline)
    # Three processes died with the run unfinished, so three recoveries.
    assert run["recovery_attempts"] == MAX_RECOVERY_ATTEMPTS
    assert_delivered_once(outcome)
    keys = outcome.keys()
    reruns = effect in ("read_only", "idempotent_write")  # the others are never re-run
    rerun = Counter({keys[0]: _chain(effect).count("in_tool_after_effect") if reruns else 0})
    assert outcome.invocations == Counter(keys) + rerun
    assert outcome.effects == (Counter() if effect == "read_only" else Counter(keys))


DECISIONS = [(point, approve) for point in ("in_tool_after_effect", "after_claim")
             for approve in (False, True)]


@pytest.mark.parametrize(
    "case", DECISIONS, ids=[f"{p}-{'approve' if a else 'deny'}" for p, a in DECISIONS])
def test_a_person_decides_an_uncertain_call(
    case: tuple[str, bool], scenario: Future[Steps]
) -> None:
    """non_idempotent, no reconcile hook, cut off after its claim: paused for a person; deny
    gives a denied result, approve runs the call again (twice, if it had happened: the
    person's choice)."""
    point, approve = case
    paused, ended = finished(scenario)
    call_id = paused.pending_call
    assert paused.run["state"] == "awaiting_approval"
    assert paused.run["pending_approval"]["reason"] == "uncertain_side_effect"
    assert call_id == CALL_IDS[0]

    run = ended.run
    assert run["state"] == "completed" and run["reply"] == "done"
    assert [(d["tool_call_id"], d["approve"], d["by"]) for d in run["decisions"]] == [
        (call_id, approve, "crash-test")]
    first, second = ended.keys()
    happened = 1 if point == "in_tool_after_effect" else 0
    assert ended.effects == Counter({first: happened + approve, second: 1})
    result = next(e for e in ended.entries
                  if e["kind"] == "tool_result" and e["tool_call_id"] == call_id)
    if approve:
        assert result["content"] == {"n": 1, "key": first, "ok": True}
    else:
        assert result["is_error"] and result["content"]["error"]["type"] == "denied"
    assert [e["kind"] for e in ended.entries] == KINDS
    assert_delivered_once(ended)


@pytest.mark.parametrize("case", ["read_only", "idempotent_write"])
def test_a_run_that_kills_every_process_becomes_poison(case: str, scenario: Future[Steps]) -> None:
    """A run that takes the process down on every start is failed, not crash-looped."""
    effect = case
    ended, after = finished(scenario)
    run = ended.run
    assert run["state"] == "failed" and run["reason"] == "poison_run", run
    assert run["recovery_attempts"] == MAX_RECOVERY_ATTEMPTS
    assert "giving up" in run["error"]
    assert [r for r in reasons(run) if r.startswith("recovered")] == [
        f"recovered after crash (attempt {i})" for i in range(1, MAX_RECOVERY_ATTEMPTS + 1)]
    first, _ = ended.keys()
    # One start with the message, three recoveries; the restart after them ran nothing.
    assert ended.invocations == Counter({first: 1 + MAX_RECOVERY_ATTEMPTS})
    assert ended.effects == (Counter() if effect == "read_only" else Counter({first: 1}))
    # The history stays valid: every call of the turn has a result; the failed run's
    # message is closed by a notice.
    assert [e["kind"] for e in ended.entries] == [
        "user", "assistant", "tool_result", "tool_result", "notice"]
    results = [e for e in ended.entries if e["kind"] == "tool_result"]
    assert [(r["tool_call_id"], r["content"]["error"]["type"]) for r in results] == [
        (c, "cancelled") for c in CALL_IDS]
    assert ended.entries[-1]["code"] == "run_failed"
    assert run["started_calls"] == []
    # The person who asked is told, once, that it did not work out.
    (notice,) = ended.replies
    assert notice["text"] == "Sorry, I could not finish this (it kept crashing)."
    assert_answered_after_poison(after)


def assert_answered_after_poison(after: Outcome) -> None:
    """The thread's next message is a turn of its own, answered as usual."""
    poisoned, nxt = after.summary["runs"]
    assert poisoned["reason"] == "poison_run"
    assert nxt["state"] == "completed" and nxt["reply"] == "done"
    # Its first request: the poisoned message stays a turn of its own, answered by the
    # failure's notice; the new message is its own user turn, never joined to it.
    first = next(r["messages"] for r in after.requests
                 if any(m["content"] == AFTER_POISON for m in r["messages"]))
    users = [m["content"] for m in first if m["role"] == "user"]
    assert users[0] == TEXT and users[-1] == AFTER_POISON, first
    assert first[-2]["role"] == "assistant" and "poison_run" in first[-2]["content"]


@pytest.mark.parametrize("case", EFFECTS)
def test_a_run_that_dies_as_the_model_is_asked_becomes_poison(
        case: str, scenario: Future[Steps]) -> None:
    """Killed every time the model is asked: the run's start is on record before it asks,
    so it is recovered each time and ends poison; nothing ran, no model call was paid for
    in a loop; the thread answers its next message."""
    ended, after = finished(scenario)
    run = ended.run
    assert run["state"] == "failed" and run["reason"] == "poison_run", run
    assert run["recovery_attempts"] == MAX_RECOVERY_ATTEMPTS
    assert reasons(run)[0] == "started"
    assert ended.invocations == Counter()
    assert [e["kind"] for e in ended.entries] == ["user", "notice"]
    (notice,) = ended.replies
    assert notice["text"] == "Sorry, I could not finish this (it kept crashing)."
    assert_answered_after_poison(after)


@pytest.mark.parametrize("case", ["idempotent_write"])
def test_a_run_recovered_after_a_kill_keeps_its_trace(
        case: str, scenario: Future[Steps]) -> None:
    """Traced ([otel]), killed inside its tool call, recovered by the next process: every
    span of both processes is in the one trace the run recorded with its start, and the
    recovering stretch says it recovered."""
    (ended,) = finished(scenario)
    assert isinstance(ended, Traced)
    run = ended.run
    assert run["state"] == "completed" and run["recovery_attempts"] == 1
    trace_id = run["trace"].split("-")[1]
    spans = ended.spans
    assert {s["context"]["trace_id"] for s in spans} == {f"0x{trace_id}"}
    stretches = [s for s in spans if s["name"].startswith("invoke_agent")]
    # The killed process's stretch never ended (nor was exported); its model call was.
    assert len(stretches) == 1
    assert [e["name"] for e in stretches[0]["events"]] == ["recovered"]
    assert stretches[0]["parent_id"] is not None  # beneath the first stretch's span
    assert sum(s["name"].startswith("chat") for s in spans) == 2


@pytest.mark.parametrize("case", ["idempotent_write"])
def test_a_redelivered_inbound_message_is_one_run(case: str, scenario: Future[Steps]) -> None:
    """The process died before the channel got its ack, so the channel sends the message
    again with the same key: one run, answered once."""
    (outcome,) = finished(scenario)
    run = outcome.run  # exactly one run
    assert run["state"] == "completed" and run["idempotency_key"] == "event-1"
    assert [e["kind"] for e in outcome.entries] == KINDS
    assert outcome.effects == Counter(outcome.keys())
    assert_delivered_once(outcome)


@pytest.mark.parametrize("case", ["in_tool_after_effect", "after_claim"])
def test_an_approved_call_cut_off_asks_again(case: str, scenario: Future[Steps]) -> None:
    """An approval lets the effect happen once: a crash while the approved call runs makes it
    uncertain again, and it is not re-run without a new decision."""
    point = case
    paused, asked, ended = finished(scenario)
    first, second = asked.keys()
    assert paused.effects == Counter({first: 1})
    run = asked.run
    assert run["state"] == "awaiting_approval", run
    assert run["pending_approval"]["reason"] == "uncertain_side_effect"
    assert asked.pending_call == paused.pending_call == CALL_IDS[0]
    # Asked about again after the approval was used up: a second prompt, once.
    assert_prompted_once(asked, CALL_IDS[0], prompts=2)
    before = 2 if point == "in_tool_after_effect" else 1
    assert asked.effects == Counter({first: before})
    assert ended.run["state"] == "completed"
    assert ended.effects == Counter({first: before, second: 1})
    assert_delivered_once(ended)


@pytest.mark.parametrize("case", ["non_idempotent", "non_idempotent_reconcile"])
def test_a_call_that_needed_approval_is_not_rerun_after_a_crash(
    case: str, scenario: Future[Steps]
) -> None:
    """requires_approval: approved once, died after the effect; the restart must not run it
    again on the old approval. With a reconcile hook it finds the effect; without, it asks."""
    effect = case
    asked, after = finished(scenario)
    assert asked.run["state"] == "awaiting_approval"
    assert asked.run["pending_approval"]["reason"] == "requires_approval"
    call_id = asked.pending_call
    assert_prompted_once(asked, call_id)
    first, _ = after.keys()
    assert after.effects == Counter({first: 1})
    assert_prompted_once(after, after.pending_call, prompts=2)
    assert after.run["state"] == "awaiting_approval"
    if effect == "non_idempotent":
        assert after.run["pending_approval"]["reason"] == "uncertain_side_effect"
        assert after.pending_call == call_id
    else:
        # The reconciled call is done; the second call needs its own approval.
        assert after.run["pending_approval"]["reason"] == "requires_approval"
        assert after.pending_call == CALL_IDS[1]
        result = next(e for e in after.entries if e["kind"] == "tool_result")
        assert result["tool_call_id"] == call_id
        assert result["content"] == {"n": 1, "key": first, "ok": True}


PROMPT_CASES = [(point, store) for point in ("after_pause", "after_delivery_sent",
                                             "after_delivery_recorded")
                for store in ("sqlite", "files")]


@pytest.mark.parametrize("case", PROMPT_CASES, ids=[f"{p}-{s}" for p, s in PROMPT_CASES])
def test_an_approval_prompt_survives_a_crash(
    case: tuple[str, str], scenario: Future[Steps]
) -> None:
    """The prompt is written with the pause: killed before it was posted, while it was being
    posted (posted, its id not recorded) or just after, the restart posts it exactly once;
    an approval then finishes the run with one reply."""
    paused, ended = finished(scenario)
    assert paused.run["state"] == "awaiting_approval"
    assert paused.run["pending_approval"]["reason"] == "requires_approval"
    assert paused.run["recovery_attempts"] == 0  # a paused run holds nothing to recover
    assert_prompted_once(paused, CALL_IDS[0])
    assert paused.effects == Counter() and paused.replies == []
    assert ended.run["state"] == "awaiting_approval"  # the second call asks too
    assert_prompted_once(ended, CALL_IDS[1], prompts=2)
