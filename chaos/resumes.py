"""A person resuming failed runs through the HTTP API (``POST /v1/runs/{id}/resume``): every
2 s the failed runs are listed; some of the plan's messages' (chosen from the seed and the
message) are resumed a few seconds later, by the person who asked (``operate``), a quarter
of those twice at once (a double click), at most twice a run. A schedule's run is not: its
message is the same at every slot, and the soak's model tells a run resumed after its
thread went on by the message its notice quotes.

A run fails when the model keeps failing past the provider's retries (an outage, a cut),
so resumes land in the middle of the faults. Checked from every resumed run's state changes:
each resume answered 200 queued the run again once (a resume never answered at most once),
the run never ended twice without being taken up again in between (from an end, only back
to ``queued``), and it ended (or waits for a person). That its answer is its own and posted
once, and that no effect was repeated, is what invariants 1, 2 and the platforms' checks
hold every run to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from .client import Client
from .invariants import RESUMED, TERMINAL, Violation
from .system import History, Replica, settled
from .workload import Workload, stable

__all__ = ["Resumer"]

SHARE = 0.6  # of the failed runs, those resumed
ROUNDS = 2  # at most this many times a run
ASK_DEADLINE_S = 120.0  # one resume, every resend included


@dataclass
class Resumed:
    """What the resumes of one run came to: every status, and attempts not answered."""

    thread: str
    statuses: list[int] = field(default_factory=list)
    lost: int = 0


class Resumer:
    def __init__(self, workload: Workload, client: Client, history: History) -> None:
        self.workload = workload
        self.client = client
        self.history = history
        self.seed = workload.plan.seed
        self.resumed: dict[str, Resumed] = {}  # run id -> its resumes
        self.details: dict[str, dict[str, Any]] = {}  # run id -> the run, read at the end
        self._seen: set[str] = set()
        self._rounds: Counter[str] = Counter()
        self.tasks: set[asyncio.Task[None]] = set()

    def _pick(self, start: int) -> Replica | None:
        return self.workload.pick(start)

    async def watch(self) -> None:
        """Every 2 s: the failed runs, each failure once; some resumed."""
        by_text = {s.op.text: s for s in self.workload.sent.values()}
        while True:
            await asyncio.sleep(2.0)
            replica = self._pick(2)
            if replica is None:
                continue
            with contextlib.suppress(httpx.HTTPError):
                for run in await self.client.runs(replica.url, "ana", state="failed"):
                    seen = f"{run['run_id']}@{run['updated_at']}"
                    if seen in self._seen:
                        continue
                    self._seen.add(seen)
                    sent = by_text.get(run["text"])
                    if sent is not None:
                        self._consider(run, sent.op.person)

    def _consider(self, run: dict[str, Any], person: str) -> None:
        run_id = run["run_id"]
        turn = self._rounds[run_id]
        if turn >= ROUNDS or stable(f"{self.seed}:{run['text']}:resume:{turn}") >= SHARE:
            return
        self._rounds[run_id] += 1
        after = 0.5 + 6 * stable(f"{self.seed}:{run['text']}:resume-after:{turn}")
        twice = stable(f"{self.seed}:{run['text']}:resume-twice:{turn}") < 0.25
        self.resumed.setdefault(run_id, Resumed(run["thread_id"]))
        for extra in [0.0] + ([0.1] if twice else []):
            task = asyncio.create_task(self._resume(run_id, person, after + extra))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _resume(self, run_id: str, person: str, after_s: float) -> None:
        """Resume the run after ``after_s``, at another replica on a transport error or a
        5xx, until one answers (or ``ASK_DEADLINE_S`` has passed)."""
        await asyncio.sleep(after_s)
        resumed = self.resumed[run_id]
        deadline, attempt = self.history.now() + ASK_DEADLINE_S, 0
        while self.history.now() < deadline:
            replica = self._pick(attempt)
            attempt += 1
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            try:
                response = await self.client.http.post(
                    f"{replica.url}/v1/runs/{run_id}/resume", headers=Client._auth(person))
            except httpx.HTTPError:
                resumed.lost += 1
                await asyncio.sleep(0.3)
                continue
            resumed.statuses.append(response.status_code)
            self.history.note("resume", f"run {run_id} by {person}: {response.status_code}")
            if response.status_code < 500:
                return
            await asyncio.sleep(0.5)
        resumed.lost += 1  # given up: it may have been taken all the same

    async def drain(self, timeout_s: float) -> None:
        await settled(self.tasks, timeout_s)

    async def read(self, base: str) -> None:
        """Every resumed run with its state changes (once settled)."""
        for run_id in self.resumed:
            self.details[run_id] = await self.client.run(base, "ana", run_id)

    # -- the invariant ----------------------------------------------------------------------

    def check(self) -> list[Violation]:
        """Each resume queued its run again once; a resumed run ends once per taking up."""
        out: list[Violation] = []
        for run_id, resumed in self.resumed.items():
            detail = self.details.get(run_id)
            if detail is None:
                out.append(Violation(1, resumed.thread, run_id, "a resumed run is gone"))
                continue
            steps = detail.get("transitions") or []
            again = sum(1 for t in steps if t["reason"] == RESUMED)
            ok = resumed.statuses.count(200)
            if not ok <= again <= ok + resumed.lost:
                out.append(Violation(1, resumed.thread, run_id, f"resumed {again} times; the "
                                     f"resumes were answered {resumed.statuses} ({resumed.lost}"
                                     " not answered)"))
            for t in steps:
                if t["source"] in TERMINAL and t["target"] != "queued":
                    out.append(Violation(1, resumed.thread, run_id, f"a resumed run ended "
                                         f"twice: {t['source']} -> {t['target']} "
                                         f"({t['reason']})"))
            if detail["state"] not in TERMINAL and detail["state"] != "awaiting_approval":
                out.append(Violation(4, resumed.thread, run_id, f"a resumed run is left "
                                     f"{detail['state']}"))
        return out

    def summary(self) -> str:
        statuses = Counter(str(s) for r in self.resumed.values() for s in r.statuses)
        ends: Counter[str] = Counter(str(d["state"]) for d in self.details.values())
        lost = sum(r.lost for r in self.resumed.values())
        return (f"  resumes    {len(self.resumed)} failed runs resumed "
                f"({', '.join(f'{k} {v}' for k, v in sorted(statuses.items())) or 'none'}, "
                f"{lost} unanswered); ended "
                f"{', '.join(f'{k} {v}' for k, v in sorted(ends.items())) or '-'}")
