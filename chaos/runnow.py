"""Schedules run now by hand (``POST /v1/schedules/{name}/run``), at the plan's times, some
twice quickly (two requests), some sent again at once with their ``Idempotency-Key``.

A run now is keyed by its request: ``schedule:{name}:manual:{id}``, its id from the
caller's key (``http:{token name}:{Idempotency-Key}``), so a request sent again (to another
replica, after a transport error or a 5xx, or twice at once) is the same run. Checked from
the store's runs (their keys, read with the runtime's store class), the threads and the
ledger: each accepted request has exactly one run, the one it was answered with (a request
never answered at most one); no run now that nobody asked for; each ended, a completed one
with its schedule's answer; each took at most one ``tick``. The slots' own invariant
(chaos/schedules.py) leaves these runs out.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from runtime import Run
from schedules.runner import manual_key

from .chat_toggles import run_asked, started
from .client import Client
from .invariants import Stored, Violation
from .plan import Plan, RunNow
from .schedules import Kept, manual_run
from .system import History, Replica, settled

__all__ = ["RunsNow", "ended_once"]

ASK_DEADLINE_S = 120.0  # one request, every resend included


@dataclass
class Asked:
    """What came of one run-now request: the runs its 2xx answers named, every status,
    and the attempts that got no answer (the request may have been taken)."""

    now: RunNow
    key: str
    run_ids: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def expected_key(self) -> str:
        """The run's key, as maiden makes it from the caller's Idempotency-Key."""
        return manual_key(self.now.schedule, f"http:{self.now.person}:{self.key}")


@dataclass
class ChatAsked:
    """A schedule run now with ``/maiden`` (``chat_toggles``): its run's key, from the
    asking's identity (Slack's trigger, Discord's interaction), and the end of the run id
    its answer named (None: no answer that names one)."""

    said: str
    key: str
    named: str | None


class RunsNow:
    def __init__(self, plan: Plan, replicas: list[Replica], client: Client,
                 history: History) -> None:
        self.plan = plan
        self.replicas = replicas
        self.client = client
        self.history = history
        self.asked = {n.tag: Asked(n, f"chaos:{plan.seed}:{n.tag}") for n in plan.runs_now}
        self.tasks: set[asyncio.Task[None]] = set()
        self.chat: list[ChatAsked] = []

    def follow(self, text: str, request: str, answer: str | None) -> None:
        """A ``/maiden`` command: if it ran a schedule now, checked with the rest."""
        name = run_asked(text)
        if name is not None and request:
            self.chat.append(ChatAsked(f"/maiden {text}", manual_key(name, request),
                                       started(answer)))

    def _pick(self, start: int) -> Replica | None:
        n = len(self.replicas)
        return next((r for i in range(n) if (r := self.replicas[(start + i) % n]).up), None)

    def _spawn(self, asked: Asked) -> None:
        task = asyncio.create_task(self._ask(asked))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> None:
        """Each run now of the plan at its time (returns once the last is sent)."""
        for now in self.plan.runs_now:
            await asyncio.sleep(max(0.0, now.at - self.history.now()))
            self._spawn(self.asked[now.tag])
            if now.again:  # the same request again at once: a double click
                self._spawn(self.asked[now.tag])

    async def drain(self, timeout_s: float) -> None:
        await settled(self.tasks, timeout_s)

    async def _ask(self, asked: Asked) -> None:
        """Send the request until a replica answers it (anything but a 5xx or a 429),
        elsewhere on a transport error, with the same key."""
        now, attempt = asked.now, 0
        deadline = self.history.now() + ASK_DEADLINE_S
        while self.history.now() < deadline:
            replica = self._pick(now.replica + attempt)
            attempt += 1
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            try:
                response = await self.client.http.post(
                    f"{replica.url}/v1/schedules/{now.schedule}/run",
                    headers={**Client._auth(now.person), "Idempotency-Key": asked.key})
            except httpx.HTTPError as exc:
                asked.lost.append(f"{self.history.now():.1f} {replica.name}: "
                                  f"{type(exc).__name__}")
                await asyncio.sleep(0.3)
                continue
            asked.statuses.append(response.status_code)
            if response.status_code >= 500 or response.status_code == 429:
                await asyncio.sleep(0.3)
                continue
            if response.status_code == 200:
                asked.run_ids.append(str(response.json()["run_id"]))
            self.history.note("run now", f"{now.tag} {now.schedule} by {now.person}: "
                              f"{response.status_code} {asked.run_ids[-1:]}")
            return
        asked.lost.append(f"{self.history.now():.1f}: gave up")

    # -- the invariant ----------------------------------------------------------------------

    def check(self, stored: Stored, kept: Kept) -> list[Violation]:
        """Invariant 3 for the runs asked for by hand."""
        out: list[Violation] = []
        manual = {str(run.idempotency_key): run for run in kept.runs if manual_run(run)}
        mine = set()
        for asked in self.asked.values():
            now, key = asked.now, asked.expected_key()
            mine.add(key)
            run = manual.get(key)
            where = run.thread_id if run else f"schedule:{now.schedule}"
            refused = [s for s in asked.statuses if 400 <= s < 500 and s != 429]
            if refused:
                out.append(Violation(3, where, None, f"run now {now.tag} of {now.schedule} "
                                     f"refused: {refused}"))
            if asked.run_ids and run is None:
                out.append(Violation(3, where, asked.run_ids[0], f"run now {now.tag} of "
                                     f"{now.schedule} was answered with runs "
                                     f"{asked.run_ids}; none holds its key {key}"))
            elif run is not None and asked.run_ids and set(asked.run_ids) != {run.id}:
                out.append(Violation(3, where, run.id, f"run now {now.tag} of {now.schedule} "
                                     f"was answered with runs {asked.run_ids}; its key "
                                     f"holds {run.id}"))
        for chat in self.chat:
            mine.add(chat.key)
            run = manual.get(chat.key)
            if chat.named is not None and (run is None or not run.id.endswith(chat.named)):
                out.append(Violation(3, run.thread_id if run else "schedule", None,
                                     f"{chat.said} answered run {chat.named}; its key "
                                     f"{chat.key} holds {run.id if run else 'no run'}"))
        for key, run in manual.items():
            if key not in mine:
                out.append(Violation(3, run.thread_id, run.id, f"a run now nobody asked for "
                                     f"(or not with its key): {key}"))
        out += ended_once(list(manual.values()), stored,
                          lambda run: str(run.idempotency_key).split(":")[1],
                          lambda name: f"run now of {name}")
        return out

    def summary(self, kept: Kept) -> str:
        statuses = Counter(str(s) for a in self.asked.values() for s in a.statuses)
        made = Counter(str(r.idempotency_key).split(":")[1] for r in kept.runs
                       if manual_run(r))
        again = sum(1 for a in self.asked.values() if a.now.again)
        lost = sum(len(a.lost) for a in self.asked.values())
        named = sum(1 for c in self.chat if c.named is not None)
        return (f"  runs now   {len(self.asked)} asked ({again} sent again at once), "
                f"{_count(statuses)}, {lost} unanswered; /maiden {len(self.chat)} ({named} "
                f"answered with their run); runs made: {_count(made)}")


def ended_once(runs: list[Run], stored: Stored, job: Callable[[Run], str],
               said: Callable[[str], str]) -> list[Violation]:
    """Each run (of a job outside the slots: a run now, a webhook's) ended, a completed one
    with its job's answer (``job``: the job's name, as the soak's model answers it), with at
    most one ``tick`` taken; ``said`` names such a run of a job in a violation."""
    out: list[Violation] = []
    ticks: dict[str, int] = defaultdict(int)
    for line in stored.ledger:
        if line["tool"] == "tick" and line["applied"]:
            ticks[line["run"]] += 1
    for run in runs:
        name = job(run)
        if run.state == "completed" and not (
                run.reply or "").startswith(f"answer to j{name}."):
            out.append(Violation(3, run.thread_id, run.id, f"{said(name)} answered "
                                 f"{run.reply!r}"))
        if ticks[run.id] > 1:
            out.append(Violation(3, run.thread_id, run.id, f"{said(name)} ticked "
                                 f"{ticks[run.id]} times"))
    return out


def _count(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"
