"""Schedules as the origin in the crash drill: kill -9 during a scheduled run, restart.

The promise: a real kill -9 during a scheduled run, and after the restart it has
completed once and was delivered once. The slot is claimed under its key
(``schedule:job:<slot>``), so whatever a restart's catch-up, a duplicate trigger or a
second maiden on the store claims again names the one run; recovery finishes that run
with the same effect-class rules as a chat run's; the outbox posts its answer to Slack
once. Each restart is ``--fire`` of the same slot again, as a restarted ``maiden run``
catches up (see the driver's docstring for what its clock does).

The fake Slack lives in this module's event loop and outlives the driver processes, as
Slack outlives maiden. Every test names a scenario (``SCENARIOS``); the selected tests'
scenarios all start at once (a few processes at a time, each with its own store and its
own Slack thread), and each test awaits and checks its own. A representative few of the
kills (``ON_POSTGRES``) are also drilled on a PostgreSQL schema, against the same baseline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from runtime.model.runs import idempotency_key
from tests.crash import launch
from tests.crash.driver import (
    JOB,
    JOB_PROMPT,
    KILL_POINTS,
)
from tests.crash.outcome import CALL_IDS, Traces, normalise, schema_name, tail
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.postgres import PG_DSN, drop_schemas, require_postgres

# Its own xdist group: the module's first test starts every selected scenario at once
# (``started``, from the session's items), so on several workers each would run them all.
pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.xdist_group("crash_schedules")]

TIMEOUT_S = 60
C = "C0GENERAL01"
SLOT = "2026-03-02T09:00:00+00:00"
KEY = f"schedule:{JOB}:{SLOT}"
THREAD = f"schedule:{JOB}"

MID_RUN = ("after_user_entry", "after_intent", "in_model_call", "after_claim",
           "in_tool_after_effect", "after_tool_result")
"""Points where the run is unfinished when the process dies: the restart recovers it."""

RUN_FIELDS = ("state", "reason", "text", "origin", "reply", "error", "turns", "tool_calls",
              "usage", "started_calls", "pending_approval", "decisions", "thread_id",
              "idempotency_key")
"""What must match the uninterrupted run (ids, owners and clocks may differ)."""

Case = tuple[str, str]
"""(effect class, kill point)"""

POINTS = [point for point in KILL_POINTS
          if point not in ("after_claim", "after_pause", "after_delivery_sent")]
"""What a scheduled run to Slack goes through with any effect class (``after_claim``: only
non_idempotent calls are claimed; ``after_pause``: nothing asks a person;
``after_delivery_sent``: the drill's file channel only, not Slack)."""

CASES: list[Case] = [("idempotent_write", point) for point in POINTS] + [
    ("read_only", "in_tool_after_effect"),
    ("non_idempotent_reconcile", "after_claim"),
    ("non_idempotent_reconcile", "in_tool_after_effect"),
]

CHAINS: list[tuple[str, ...]] = [("after_queued", "in_tool_after_effect"),
                                 ("after_intent", "before_delivery_recorded")]
"""Kill points of successive processes: the first ``--fire``, then its restart."""


# -- driving processes -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome(Traces):
    """What one driver process left behind, and the Slack thread the schedule delivers to."""

    messages: list[dict[str, Any]]
    """The bot's messages in the schedule's Slack thread."""
    posts: list[dict[str, Any]]
    """Every ``chat.postMessage`` to that thread."""
    thread_ts: str

    @property
    def fired(self) -> list[dict[str, Any]]:
        return self.summary["fired"]  # type: ignore[no-any-return]

    @property
    def record(self) -> dict[str, Any]:
        (record,) = self.summary["schedules"]
        return record  # type: ignore[no-any-return]

    def deliveries(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.summary["deliveries"] if d["kind"] == kind]


@dataclass
class Drill:
    """One store, one set of trace files and one Slack thread, driven by successive driver
    processes."""

    root: Path
    effect: str
    fake: FakeSlack
    limit: asyncio.Semaphore
    store: str = "sqlite"
    thread_ts: str = ""

    def __post_init__(self) -> None:
        (self.root / "traces").mkdir(parents=True)
        self.thread_ts = self.fake.post_as_user(C, "U1", "daily reports here")["ts"]

    async def run(self, *args: str) -> Outcome:
        """Run the driver to its end; return what it left."""
        code, out, err = await self._spawn(args)
        assert code == 0, f"driver {args} exited {code}:\n{tail(err)}"
        traces = self.root / "traces"
        return Outcome(
            **Traces.read(json.loads(out), traces),
            messages=[m for m in self.fake.messages(C) if m.get("user") == BOT_USER
                      and m.get("thread_ts") == self.thread_ts],
            posts=[p for p in self.fake.calls("chat.postMessage")
                   if p.get("thread_ts") == self.thread_ts],
            thread_ts=self.thread_ts)

    async def kill(self, *args: str) -> None:
        """Run the driver; it must die of SIGKILL at the kill point it was given."""
        code, out, err = await self._spawn(args)
        assert code == -signal.SIGKILL, (
            f"driver {args} was expected to be killed but exited {code}:\n"
            f"{tail(err)}\n{tail(out)}")

    async def fire(self, *args: str) -> Outcome:
        return await self.run("--fire", SLOT, *args)

    async def fire_killed(self, point: str, *args: str) -> None:
        await self.kill("--fire", SLOT, "--kill-at", point, *args)

    async def _spawn(self, args: tuple[str, ...]) -> tuple[int | None, str, str]:
        where = ["--db", str(self.root / "maiden.db")] if self.store == "sqlite" else \
            ["--db", schema_name(self.root), "--store", self.store, "--dsn", PG_DSN]
        command = [*where, "--effect", self.effect,
                   "--workdir", str(self.root / "traces"),
                   "--slack", self.fake.api_url, self.fake.bot_token, C, self.thread_ts, *args]
        async with self.limit:
            proc = launch.start(*command)
            try:
                done = await proc.finished(TIMEOUT_S)  # (killed if it takes longer)
            except BaseException:  # cancelled: it must not outlive the test
                proc.kill()
                raise
        return done.returncode, done.stdout, done.stderr


# -- scenarios: the processes of one test, returning the outcome of each that ended ----------

Steps = list[Outcome]


async def _baseline(drill: Drill, _: object) -> Steps:
    return [await drill.fire(), await drill.fire()]


async def _killed_once(drill: Drill, case: Case) -> Steps:
    _, point = case
    await drill.fire_killed(point)
    return [await drill.fire()]


async def _killed_once_on_postgres(drill: Drill, case: Case) -> Steps:
    drill.store = "postgres"
    return await _killed_once(drill, case)


async def _killed_twice(drill: Drill, chain: tuple[str, ...]) -> Steps:
    for point in chain:
        await drill.fire_killed(point)
    return [await drill.fire()]


async def _restarted_late(drill: Drill, _: object) -> Steps:
    await drill.fire_killed("after_queued")
    return [await drill.fire("--late", "600")]


async def _recovered_then_fired(drill: Drill, _: object) -> Steps:
    await drill.fire_killed("after_queued")
    return [await drill.run("--recover"), await drill.fire()]


async def _a_person_decides(drill: Drill, point: str) -> Steps:
    await drill.fire_killed(point)
    paused = await drill.fire()
    return [paused, await drill.run("--deny", paused.run["id"], paused.pending_call)]


Scenario = Callable[[Drill, Any], Coroutine[Any, Any, Steps]]

SCENARIOS: dict[str, tuple[Scenario, Callable[[Any], str]]] = {
    "test_a_scheduled_run_killed_once": (_killed_once, lambda case: case[0]),
    "test_a_scheduled_run_killed_once_on_postgres": (_killed_once_on_postgres,
                                                     lambda case: case[0]),
    "test_a_scheduled_run_killed_twice": (_killed_twice, lambda _: "idempotent_write"),
    "test_a_restart_after_the_slot_was_missed": (_restarted_late, lambda _: "idempotent_write"),
    "test_a_run_recovered_before_the_scheduler_starts": (_recovered_then_fired,
                                                          lambda _: "idempotent_write"),
    "test_an_uncertain_scheduled_call_waits_for_a_person": (_a_person_decides,
                                                            lambda _: "non_idempotent"),
}
"""Each test here is parametrized by ``case``: its scenario, and the effect class it uses."""

BASELINE_EFFECTS = ("idempotent_write", "read_only", "non_idempotent_reconcile")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as slack:
        yield slack


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def started(
    request: pytest.FixtureRequest, fake: FakeSlack, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, asyncio.Task[Steps]]]:
    """The scenarios of every selected test of this module (and every baseline), all started
    at once."""
    limit = asyncio.Semaphore(min(4, max(2, os.cpu_count() or 2)))

    drills: list[Drill] = []

    def start(name: str, scenario: Scenario, effect: str, case: object) -> asyncio.Task[Steps]:
        root = tmp_path_factory.mktemp(re.sub(r"[^\w.-]+", "_", name)[:60])
        drill = Drill(root, effect, fake, limit)
        drills.append(drill)
        return asyncio.create_task(scenario(drill, case), name=name)

    tasks = {f"baseline-{effect}": start(f"baseline-{effect}", _baseline, effect, effect)
             for effect in BASELINE_EFFECTS}
    for item in request.session.items:
        found = SCENARIOS.get(getattr(item, "originalname", ""))
        if found is None or getattr(item, "module", None) is not request.module:
            continue
        scenario, effect_of = found
        case = item.callspec.params["case"]  # type: ignore[attr-defined]
        tasks[item.name] = start(item.name, scenario, effect_of(case), case)
    yield tasks
    for task in tasks.values():
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    # Here, not per test: the scenarios run across the module's tests.
    await drop_schemas([schema_name(d.root) for d in drills if d.store == "postgres"])


async def finished(task: asyncio.Task[Steps]) -> Steps:
    return await asyncio.wait_for(asyncio.shield(task), TIMEOUT_S * 3)


@pytest.fixture
def scenario(request: pytest.FixtureRequest,
             started: dict[str, asyncio.Task[Steps]]) -> asyncio.Task[Steps]:
    """This test's scenario (await it with ``finished``, in the test)."""
    return started[request.node.name]


async def baseline_of(started: dict[str, asyncio.Task[Steps]], effect: str) -> Outcome:
    """The uninterrupted scheduled run with this effect class."""
    return (await finished(started[f"baseline-{effect}"]))[0]


# -- comparing with the uninterrupted run ----------------------------------------------------


def _names(outcome: Outcome) -> dict[str, str]:
    run_id = outcome.run["id"]
    names = {run_id: "<run>", idempotency_key(run_id, "delivery"): "<delivery key>",
             outcome.thread_ts: "<slack thread>"}
    names.update({idempotency_key(run_id, c): f"<key of {c}>" for c in CALL_IDS})
    return names


def comparable_entries(outcome: Outcome) -> list[dict[str, Any]]:
    """The thread's entries with ids, keys and clocks replaced by what they stand for."""
    return [normalise({k: v for k, v in entry.items() if k != "at"}, _names(outcome))
            for entry in outcome.entries]


def comparable_run(outcome: Outcome) -> dict[str, Any]:
    return {field: normalise(outcome.run[field], _names(outcome)) for field in RUN_FIELDS}


def reasons(run: dict[str, Any]) -> list[str]:
    return [t["reason"] for t in run["transitions"]]


def assert_the_slot_is_one_run(*outcomes: Outcome) -> None:
    """One run holds the slot's key; every claim of the slot, by any process, named it; the
    schedule's record says the slot went to it."""
    last = outcomes[-1]
    run = last.run  # exactly one run in the store
    assert run["idempotency_key"] == KEY and run["thread_id"] == THREAD
    assert run["text"] == JOB_PROMPT
    assert run["origin"] == {"channel": "slack", "target": {"channel": C,
                                                            "thread_ts": last.thread_ts},
                             "user": None, "place": [], "direct": False,
                             "private": False, "rights": [], "user_name": None}
    for outcome in outcomes:
        assert all(f["key"] == KEY and f["run_id"] == run["id"] for f in outcome.fired), \
            outcome.fired
    record = last.record
    assert record["name"] == JOB and record["last_run_id"] == run["id"]
    assert record["last_slot"] == datetime.fromisoformat(SLOT).timestamp()


def assert_delivered_once(outcome: Outcome, posts: int = 1) -> None:
    """The answer was posted once, in the schedule's thread, its ts recorded (``posts``: every
    post to the thread so far, approval prompts included)."""
    run = outcome.run
    (record,) = outcome.deliveries("reply")
    carrying = [m for m in outcome.messages
                if m["metadata"]["event_payload"]["key"] == record["key"]]
    assert len(carrying) == 1, f"the reply was posted {len(carrying)} times: {carrying}"
    (message,) = carrying
    assert message["text"] == run["reply"] == "done"
    assert message["thread_ts"] == outcome.thread_ts
    assert record["remote_id"] == message["ts"], "the posted message's ts was not recorded"
    assert len(outcome.posts) == posts, outcome.posts
    assert len(outcome.messages) == posts, outcome.messages


def assert_effects(effect: str, outcome: Outcome, reruns: Counter[str]) -> None:
    """The chat runs' rules: a read may run again, an idempotent write runs again under its
    key and applies once, a non-idempotent call (with a reconcile hook) is never re-run."""
    keys = Counter(outcome.keys())
    if effect == "read_only":
        assert outcome.invocations == keys + reruns
        assert outcome.effects == Counter()
    elif effect == "idempotent_write":
        assert outcome.invocations == keys + reruns
        assert outcome.effects == keys
    else:
        assert outcome.invocations == keys
        assert outcome.effects == keys
        assert outcome.run["decisions"] == []


def check_recovered(effect: str, kills: tuple[str, ...], outcome: Outcome,
                    baseline: Outcome) -> None:
    """Killed at each of ``kills`` in turn, restarted: the same end as without the crash."""
    run = outcome.run
    assert_the_slot_is_one_run(outcome)
    assert run["state"] == "completed", run
    assert comparable_entries(outcome) == comparable_entries(baseline)
    assert comparable_run(outcome) == comparable_run(baseline)
    assert reasons(run)[-1] == "answered"
    # Every round is committed before going on: killed mid-run, whatever the tool's effect,
    # the restart recovers the run.
    attempts = sum(point in MID_RUN for point in kills)
    assert run["recovery_attempts"] == attempts
    assert reasons(run).count("recovered after crash (attempt 1)") == min(attempts, 1)
    assert_delivered_once(outcome)
    first = outcome.keys()[0]
    assert_effects(effect, outcome, Counter({first: kills.count("in_tool_after_effect")}))


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", BASELINE_EFFECTS)
async def test_baseline_is_what_the_drill_compares_with(
    case: str, started: dict[str, asyncio.Task[Steps]]
) -> None:
    """Uninterrupted: the alarm claims the slot; the duplicate trigger and the second
    maiden (which re-reads the record when it fires) find it claimed and claim nothing; two
    calls, one reply in the schedule's Slack thread. A restart after it claims nothing and
    changes nothing."""
    effect = case
    base, restarted = await finished(started[f"baseline-{effect}"])
    assert [f["by"] for f in base.fired] == ["alarm"]
    assert_the_slot_is_one_run(base, restarted)
    run = base.run
    assert run["state"] == "completed" and run["recovery_attempts"] == 0
    assert reasons(run) == ["started", "tool calls requested", "tool results recorded",
                            "answered"]
    assert [e["kind"] for e in base.entries] == ["user", "assistant", "tool_result",
                                                 "tool_result", "assistant"]
    assert base.entries[0]["text"] == JOB_PROMPT
    assert_delivered_once(base)
    assert_effects(effect, base, Counter())
    assert restarted.fired == []
    assert {k: v for k, v in restarted.summary.items() if k != "fired"} == \
        {k: v for k, v in base.summary.items() if k != "fired"}
    assert restarted.messages == base.messages and restarted.posts == base.posts


@pytest.mark.parametrize("case", CASES, ids=[f"{e}-{p}" for e, p in CASES])
async def test_a_scheduled_run_killed_once(
    case: Case, scenario: asyncio.Task[Steps], started: dict[str, asyncio.Task[Steps]]
) -> None:
    """kill -9 the maiden firing the slot at ``point``; restarted, it catches the slot up: the
    one run completes as if nothing happened, its answer posted to Slack once."""
    effect, point = case
    (outcome,) = await finished(scenario)
    check_recovered(effect, (point,), outcome, await baseline_of(started, effect))
    if point == "after_queued":
        # Died before the schedule's record said the slot was claimed: the restart's
        # catch-up claimed it again, and got the run the first claim made.
        assert [f["by"] for f in outcome.fired] == ["start"]


ON_POSTGRES: list[Case] = [("idempotent_write", "after_queued"),
                           ("idempotent_write", "in_tool_after_effect"),
                           ("non_idempotent_reconcile", "after_claim"),
                           ("idempotent_write", "before_delivery_recorded")]
"""A representative few of ``CASES`` (the claim, the tool, the delivery), on PostgreSQL."""


@pytest.mark.parametrize("case", ON_POSTGRES, ids=[f"{e}-{p}" for e, p in ON_POSTGRES])
async def test_a_scheduled_run_killed_once_on_postgres(
    case: Case, scenario: asyncio.Task[Steps], started: dict[str, asyncio.Task[Steps]]
) -> None:
    """As ``test_a_scheduled_run_killed_once``, each process on a PostgreSQL schema: the
    same end as the uninterrupted run (on SQLite) has."""
    await require_postgres()
    effect, point = case
    (outcome,) = await finished(scenario)
    check_recovered(effect, (point,), outcome, await baseline_of(started, effect))


@pytest.mark.parametrize("case", CHAINS, ids=["-".join(c) for c in CHAINS])
async def test_a_scheduled_run_killed_twice(
    case: tuple[str, ...], scenario: asyncio.Task[Steps],
    started: dict[str, asyncio.Task[Steps]]
) -> None:
    """The first restart dies too, further on; the second finishes the one run."""
    (outcome,) = await finished(scenario)
    check_recovered("idempotent_write", case, outcome,
                    await baseline_of(started, "idempotent_write"))


@pytest.mark.parametrize("case", ["after_queued"])
async def test_a_restart_after_the_slot_was_missed(
    case: str, scenario: asyncio.Task[Steps], started: dict[str, asyncio.Task[Steps]]
) -> None:
    """Restarted ten minutes after the slot (past ``ON_TIME``): ``misfire = "once"`` catches
    the slot up, and that claim is the run the killed process made."""
    (outcome,) = await finished(scenario)
    check_recovered("idempotent_write", (case,), outcome,
                    await baseline_of(started, "idempotent_write"))
    assert [f["by"] for f in outcome.fired] == ["start"]


@pytest.mark.parametrize("case", ["after_queued"])
async def test_a_run_recovered_before_the_scheduler_starts(
    case: str, scenario: asyncio.Task[Steps], started: dict[str, asyncio.Task[Steps]]
) -> None:
    """A restart without the scheduler (``--recover``) finishes the queued run; the
    scheduler's catch-up afterwards claims the slot, finds that run done and adds
    nothing: no second run, no second post."""
    recovered, fired = await finished(scenario)
    baseline = await baseline_of(started, "idempotent_write")
    assert recovered.summary["runs"] == fired.summary["runs"]
    assert recovered.messages == fired.messages and recovered.posts == fired.posts
    check_recovered("idempotent_write", (case,), fired, baseline)
    assert [f["by"] for f in fired.fired] == ["start"]


@pytest.mark.parametrize("case", ["after_claim", "in_tool_after_effect"])
async def test_an_uncertain_scheduled_call_waits_for_a_person(
    case: str, scenario: asyncio.Task[Steps]
) -> None:
    """non_idempotent, no reconcile hook, cut off after its claim: as in a chat run, the
    restart does not run it again but asks in the schedule's Slack thread, once; denied,
    the run finishes and answers once."""
    point = case
    paused, ended = await finished(scenario)
    assert_the_slot_is_one_run(paused)
    run = paused.run
    assert run["state"] == "awaiting_approval", run
    assert run["pending_approval"]["reason"] == "uncertain_side_effect"
    assert paused.pending_call == CALL_IDS[0]
    first, second = paused.keys()
    happened = 1 if point == "in_tool_after_effect" else 0
    assert paused.effects == paused.invocations == Counter({first: happened})
    (prompt,) = paused.deliveries("approval")
    assert prompt["tool_call_id"] == CALL_IDS[0]
    assert [m["ts"] for m in paused.messages] == [prompt["remote_id"]]
    assert len(paused.posts) == 1

    run = ended.run
    assert run["state"] == "completed" and run["id"] == paused.run["id"]
    assert [(d["tool_call_id"], d["approve"]) for d in run["decisions"]] == [
        (CALL_IDS[0], False)]
    assert ended.effects == ended.invocations == Counter({first: happened, second: 1})
    assert_delivered_once(ended, posts=2)
