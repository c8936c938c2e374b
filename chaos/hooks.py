"""A webhook's sender (``[[hooks]]``, ``POST /v1/hooks/ci``): deliveries at the plan's times,
signed as GitHub signs them, each to a replica (another one on a transport error or a 5xx,
the same delivery id: what a sender does when its answer is lost), some delivered again a
moment later (a sender's redelivery), some with no valid signature.

Checked from the store's runs (their keys, read with the runtime's store class) and the
ledger: a signed delivery has exactly one run, the one every 2xx answer named (202 the
first, 200 ``again`` after), whatever was sent again; an unsigned one was refused 401
every time and has none; no hook run nobody sent; each ended, a completed one with its
job's answer, with at most one ``tick``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections import Counter
from dataclasses import dataclass, field

import httpx

from schedules.hooks import hook_key

from .hook_plan import HOOK, HookSend
from .invariants import Stored, Violation
from .model import job_prompt
from .runnow import ended_once
from .schedules import Kept
from .system import History, Replica, settled

__all__ = ["HOOK_SECRET", "Hooks", "hook_run", "hooks_toml"]

HOOK_SECRET = "chaos-hook-secret"
SEND_DEADLINE_S = 120.0  # one delivery, every resend included


def hooks_toml() -> str:
    """The replicas' ``[[hooks]]``: a job the soak's model runs as a schedule's (a ``tick``)."""
    return (f'\n[[hooks]]\nname = "{HOOK}"\nsecret_env = "CHAOS_HOOK_SECRET"\n'
            f'prompt = "{job_prompt("hook")}"\n')


def hook_run(key: str | None) -> bool:
    """A run started by a webhook's delivery (``hook:{name}:{id}``)."""
    return (key or "").startswith("hook:")


@dataclass
class Sent:
    send: HookSend
    delivery: str
    body: bytes
    statuses: list[int] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    lost: int = 0


class Hooks:
    def __init__(self, sends: list[HookSend], seed: int, replicas: list[Replica],
                 client: httpx.AsyncClient, history: History) -> None:
        self.replicas = replicas
        self.http = client
        self.history = history
        self.sent = {s.tag: Sent(s, f"chaos-{seed}-{s.tag}",
                                 json.dumps({"tag": s.tag, "seed": seed}).encode())
                     for s in sends}
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Each delivery at its time, and again when the plan says (returns once the last
        is on its way)."""
        for sent in self.sent.values():
            await asyncio.sleep(max(0.0, sent.send.at - self.history.now()))
            self._spawn(sent, 0.0)
            if sent.send.again:
                self._spawn(sent, sent.send.again_s)

    async def drain(self, timeout_s: float) -> None:
        await settled(self.tasks, timeout_s)

    def _spawn(self, sent: Sent, after_s: float) -> None:
        task = asyncio.create_task(self._deliver(sent, after_s))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _pick(self, start: int) -> Replica | None:
        n = len(self.replicas)
        return next((r for i in range(n) if (r := self.replicas[(start + i) % n]).up), None)

    async def _deliver(self, sent: Sent, after_s: float) -> None:
        """Deliver until a replica answers (anything but a 5xx or a 429), elsewhere on a
        transport error, with the same delivery id."""
        await asyncio.sleep(after_s)
        secret = b"not the secret" if sent.send.unsigned else HOOK_SECRET.encode()
        headers = {"X-Hub-Signature-256": "sha256=" + hmac.new(
            secret, sent.body, hashlib.sha256).hexdigest(), "X-GitHub-Delivery": sent.delivery,
            "Content-Type": "application/json", "X-GitHub-Event": "push"}
        attempt = 0
        deadline = self.history.now() + SEND_DEADLINE_S
        while self.history.now() < deadline:
            replica = self._pick(sent.send.replica + attempt)
            attempt += 1
            if replica is None:
                await asyncio.sleep(0.5)
                continue
            try:
                response = await self.http.post(f"{replica.url}/v1/hooks/{HOOK}",
                                                content=sent.body, headers=headers)
            except httpx.HTTPError:
                sent.lost += 1
                await asyncio.sleep(0.3)
                continue
            if response.status_code >= 500 or response.status_code == 429:
                await asyncio.sleep(0.3)
                continue
            sent.statuses.append(response.status_code)
            if response.status_code in (200, 202):
                sent.run_ids.append(str(response.json()["run_id"]))
            self.history.note("hook", f"{sent.send.tag} to r{replica.index}: "
                              f"{response.status_code}")
            return
        sent.statuses.append(0)

    def check(self, stored: Stored, kept: Kept) -> list[Violation]:
        """Invariant 3 for the webhook's deliveries: one run each, or none if unsigned."""
        out: list[Violation] = []
        made = {str(r.idempotency_key): r for r in kept.runs if hook_run(r.idempotency_key)}
        mine = set()
        for sent in self.sent.values():
            key = hook_key(HOOK, sent.delivery)
            mine.add(key)
            run = made.get(key)
            where = run.thread_id if run else f"hook:{HOOK}"
            said = f"delivery {sent.send.tag}"
            if sent.send.unsigned:
                if run is not None or any(s not in (0, 401) for s in sent.statuses):
                    out.append(Violation(3, where, run.id if run else None, f"{said}, unsigned,"
                                         f" was answered {sent.statuses} and made "
                                         f"{run.id if run else 'no run'}"))
                continue
            refused = [s for s in sent.statuses if 400 <= s < 500]
            if refused:
                out.append(Violation(3, where, None, f"{said} refused: {refused}"))
            if sent.run_ids and (run is None or set(sent.run_ids) != {run.id}):
                out.append(Violation(3, where, sent.run_ids[0], f"{said} was answered with "
                                     f"runs {sent.run_ids}; its key {key} holds "
                                     f"{run.id if run else 'no run'}"))
        for key, run in made.items():
            if key not in mine:
                out.append(Violation(3, run.thread_id, run.id, f"a hook run nobody sent: {key}"))
        out += ended_once(list(made.values()), stored, lambda run: "hook",
                          lambda name: "hook run")
        return out

    def summary(self, kept: Kept) -> str:
        statuses = Counter(str(s) for sent in self.sent.values() for s in sent.statuses)
        again = sum(1 for sent in self.sent.values() if sent.send.again)
        unsigned = sum(1 for sent in self.sent.values() if sent.send.unsigned)
        runs = sum(1 for r in kept.runs if hook_run(r.idempotency_key))
        lost = sum(sent.lost for sent in self.sent.values())
        return (f"  hooks      {len(self.sent)} deliveries ({again} delivered again, {unsigned}"
                f" unsigned), {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))},"
                f" {lost} unanswered; {runs} runs made")
