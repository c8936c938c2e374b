"""Workload 9: a replica scaling run (issues 18 and 53). Workload 4 (threads x messages, each
user waiting for the reply before the next; a model that takes 100 ms a call) through the
HTTP API of 1, 2, then 3 ``maiden run`` processes on one PostgreSQL schema.

Each replica is a real process (its own event loop and CPU) started as an operator would
(``replicas_procs``): ``python -m bot --log-format json run`` with ``[store] kind =
"postgres"`` and ``[runtime] concurrency = "global"``: one run at a time per replica, so
replicas are the unit of scale and the ideal is ``replicas / (2 x latency)`` messages a
second (two model calls per message). A ``"thread"`` variant (each replica runs every
thread at once: ideal ``threads / (2 x latency)`` whatever the replicas) follows, with
twice the messages (its phases are short), then the same with a slow model (1 s a call, 1
and 2 replicas, a message fewer than global mode: one replica is not CPU-bound there).
The whole workload is bounded (``budget_s``, 200 s): a phase that would run past it is cut
and says so, and the phases after it are listed as not measured.

The model is ``bench.latency_model``: an OpenAI-compatible server in a process of its own
that sleeps ``latency`` and answers as the workload's model does (a ``lookup`` call, then
the answer), streamed; the replicas use ``[provider] kind = "openai"`` with its
``base_url``, and a ``lookup`` tool module written next to their ``agent.toml``.

Message ``i`` of thread ``t`` goes to replica ``(t + i) % n``: the load is even, and each
thread's next message lands on another replica than the last (a load balancer without
affinity). Replicas are started one at a time between the phases (1 replica measured,
a second started, 2 measured, ...), each warmed by one message before it is measured; the
users get a fresh HTTP client each phase.

Besides messages/s each phase records where the CPU went (``replicas_cpu``: the whole
machine, each replica, the PostgreSQL server when it is local, the model's process, this
process's clients), what the replicas' database connections were doing (``replicas_db``:
``pg_stat_activity`` sampled every 0.25 s), the server's commits and WAL syncs a second,
the model calls made (a retry shows as more than two a message), and its hand-offs
(``handoffs``: from a message's acceptance on one replica to its run's start, the thread's
previous message run by another; and from each run's end to its reply at the user). After
the run: every thread's entries counted (four a message), the runs' states, and the
warnings and errors in the replicas' logs.

The server is ``MAIDEN_BENCH_PG_DSN`` (as workload 8); a schema of its own, dropped after.
Without a server the workload says so in one row.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from uuid import uuid4

import httpx

from runtime.stores.dsn import redact_dsn

from .handoffs import Answered
from .postgres import PG_DSN
from .replicas_cpu import cpu, postmaster, proc_seconds, stat_fields
from .replicas_db import Db
from .replicas_figures import DbActivity, Mode, Phase, ReplicasResult
from .replicas_procs import (
    Process,
    Replica,
    kill,
    replica_env,
    start_model,
    start_replica,
    stop,
)
from .workload import user_text

__all__ = ["DbActivity", "Phase", "ReplicasResult", "run_replicas"]


@dataclass(frozen=True)
class _Variant:
    """One mode and model, measured with 1, 2, ... replicas."""

    mode: Mode
    latency_s: float
    counts: tuple[int, ...]
    messages: int
    """Per thread."""
    slow: bool = False

    @property
    def name(self) -> str:
        return f"{self.mode} ({self.latency_s:g} s model)" if self.slow else self.mode


# -- the clients ---------------------------------------------------------------------------


async def _user(client: httpx.AsyncClient, urls: Sequence[str], thread: str, t: int,
                messages: int, phase: Phase) -> None:
    for i in range(messages):
        replica = (t + i) % len(urls)
        try:
            response = await client.post(f"{urls[replica]}/v1/threads/{thread}/messages",
                                         json={"text": user_text(i)})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            phase.failed.append(f"{thread} message {i}: {type(exc).__name__}: {exc}")
            continue
        if response.status_code == 200 and body.get("state") == "completed":
            phase.done += 1
            phase.answered.append(Answered(thread, i, replica, time.time()))
        else:
            phase.failed.append(f"{thread} message {i}: HTTP {response.status_code} "
                                f"{body.get('state')} {body.get('reason')} {body.get('error')}")


async def _model_calls(client: httpx.AsyncClient, model_url: str) -> tuple[int, int]:
    """(requests, connections) the model server has seen."""
    stats = (await client.get(f"{model_url}/stats")).json()
    return int(stats["requests"]), int(stats["connections"])


def _phase_timeout(phase: Phase) -> float:
    """Three times the ideal, and half a minute."""
    return 3 * phase.threads * phase.messages / phase.ideal_per_second + 30


def _client(token: str, threads: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(60.0), trust_env=False,
                             headers={"Authorization": f"Bearer {token}"},
                             limits=httpx.Limits(max_connections=4 * threads))


async def _phase(client: httpx.AsyncClient, replicas: Sequence[Replica], phase: Phase, *,
                 model: Process, model_url: str, postmaster: int | None, db: Db | None,
                 schema: str, timeout_s: float, cut_by_budget: bool, token: str) -> None:
    urls = [r.url for r in replicas]
    pids = [r.process.proc.pid for r in replicas]
    tag = phase.tag
    calls_before = await _model_calls(client, model_url)
    counters_before = await db.counters() if db is not None else None
    stop = asyncio.Event()
    activity = DbActivity()
    seen: set[int] = set()
    backends_before: dict[int, float] = {}
    if db is not None and postmaster is not None:
        backends_before = {b: proc_seconds(b) for b in await db.backends(pids)}
    sampler = asyncio.create_task(db.sample(pids, activity, seen, stop)) \
        if db is not None else None
    # The users' own client: no connection left idle from an earlier phase (a server's
    # keep-alive timeout closing it as it is reused makes a ReadError of a message).
    users = _client(token, phase.threads)
    before = cpu(pids, postmaster, model.proc.pid)
    try:
        async with users, asyncio.timeout(timeout_s):
            await asyncio.gather(*(_user(users, urls, f"{tag}-{t}", t, phase.messages, phase)
                                   for t in range(phase.threads)))
    except TimeoutError:
        phase.timed_out = True
        phase.cut_by_budget = cut_by_budget
    after = cpu(pids, postmaster, model.proc.pid)
    backends_after = {b: proc_seconds(b) for b in seen | set(backends_before)
                      if stat_fields(b) is not None}
    phase.elapsed_s = after.at - before.at
    stop.set()
    if sampler is not None:
        try:
            await sampler
        except Exception as exc:  # the figures stand without it
            phase.failed.append(f"bench: the pg_stat_activity sampler failed: {exc}")
        else:
            n = max(1, activity.samples)
            for name in ("connections", "running", "io", "lock", "lwlock", "other_wait",
                         "idle_in_transaction", "idle"):
                setattr(activity, name, getattr(activity, name) / n)
            phase.db = activity
    span = phase.elapsed_s
    phase.machine_cores = (after.machine[0] - before.machine[0]) / span
    phase.steal_cores = (after.machine[1] - before.machine[1]) / span
    phase.replica_cores = [(a - b) / span for a, b in zip(after.replicas, before.replicas,
                                                          strict=True)]
    if after.postgres is not None and before.postgres is not None:
        phase.postgres_cores = (after.postgres - before.postgres) / span
    phase.model_cores = (after.model - before.model) / span
    phase.client_cores = (after.client - before.client) / span
    phase.backends = len(seen | set(backends_before))
    if postmaster is not None and db is not None:
        phase.backend_cores = sum(max(0.0, t - backends_before.get(b, 0.0))
                                  for b, t in backends_after.items()) / span
    calls_after = await _model_calls(client, model_url)
    phase.model_calls = calls_after[0] - calls_before[0]
    phase.model_connections = calls_after[1] - calls_before[1]
    counters_after = await db.counters() if db is not None else None
    if counters_before is not None and counters_after is not None:
        phase.commits_per_s = (counters_after[0] - counters_before[0]) / span
        phase.wal_syncs_per_s = (counters_after[1] - counters_before[1]) / span
    if db is not None:
        try:
            phase.handoffs = await db.handoffs(schema, phase, pids)
        except Exception as exc:  # the figures stand without it
            phase.failed.append(f"bench: reading the hand-offs failed: {exc}")


# -- the logs ------------------------------------------------------------------------------

_IDS = re.compile(r"\b[0-9a-f]{12,}\b")
_THREADS = re.compile(r"bench-[a-z0-9-]+")
_PIDS = re.compile(r"\b(process|pid) \d+")


def _log_problems(logs: Sequence[Path]) -> list[tuple[int, str]]:
    found: Counter[str] = Counter()
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                found[f"(not JSON) {line[:160]}"] += 1
                continue
            if not isinstance(record, dict):
                continue
            level = str(record.get("level", ""))
            if level in ("warning", "error", "critical"):
                text = _PIDS.sub(r"\1 N", _THREADS.sub("bench-…", _IDS.sub(
                    "…", str(record.get("message", "")))))
                found[f"{level} {record.get('logger')}: {text[:200]}"] += 1
    return [(n, what) for what, n in found.most_common()]


# -- the workload --------------------------------------------------------------------------


def _variants(modes: Sequence[Mode], counts: Sequence[int], messages: int,
              thread_messages: int | None, latency_s: float, slow_latency_s: float
              ) -> list[_Variant]:
    variants = [_Variant(mode, latency_s, tuple(counts),
                         messages if mode == "global" else thread_messages or messages)
                for mode in modes]
    if slow_latency_s and "thread" in modes:
        variants.append(_Variant("thread", slow_latency_s, tuple(c for c in counts if c <= 2),
                                 max(2, messages - 1), slow=True))
    return variants


async def run_replicas(
    workdir: Path,
    *,
    threads: int,
    messages: int,
    latency_s: float,
    counts: Sequence[int] = (1, 2, 3),
    modes: Sequence[Mode] = ("global", "thread"),
    budget_s: float = 200.0,
    thread_messages: int | None = None,
    slow_latency_s: float = 1.0,
) -> ReplicasResult:
    """Workload 9: ``threads`` users x ``messages`` through 1, 2, 3 replicas, per mode
    (``thread_messages`` for ``"thread"``, default ``messages``); then thread mode with a
    model of ``slow_latency_s`` (0: not) through 1 and 2 replicas, ``messages - 1`` each.

    Bounded by ``budget_s`` from the first replica's start: a phase gets at most what is
    left (cut short, it says TIMED OUT) and the phases after the budget are not run."""
    import asyncpg  # type: ignore[import-untyped]

    result = ReplicasResult(where=redact_dsn(PG_DSN), threads=threads, messages=messages,
                            latency_s=latency_s, cores=os.cpu_count() or 1,
                            slow_latency_s=slow_latency_s, budget_s=budget_s)
    try:
        conn = await asyncpg.connect(PG_DSN, timeout=2)
    except Exception as exc:
        result.skipped = f"no PostgreSQL at {result.where} ({type(exc).__name__})"
        return result
    schema = f"maiden_bench_{uuid4().hex[:12]}"
    token = "bench-" + uuid4().hex
    env = replica_env(token)
    home = workdir / f"replicas-{schema}"
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    server = urlsplit(PG_DSN)
    local = server.hostname in (None, "", "127.0.0.1", "localhost", "::1")
    db = Db(conn, server.port or 5432)
    server_pid = postmaster() if local else None
    models: dict[float, tuple[Process, str]] = {}
    replicas: list[Replica] = []
    logs: list[Path] = []
    try:
        async with _client(token, threads) as client:
            deadline = time.monotonic() + budget_s
            for variant in _variants(modes, counts, messages, thread_messages, latency_s,
                                     slow_latency_s):
                if variant.latency_s not in models:
                    models[variant.latency_s] = await start_model(home, env, variant.latency_s)
                model, model_url = models[variant.latency_s]
                for n in variant.counts:
                    if deadline - time.monotonic() < 10:
                        result.not_measured.append(f"{variant.name} x {n}")
                        continue
                    while len(replicas) < n:
                        k = len(replicas)
                        replica, took = await start_replica(
                            home / f"{'slow' if variant.slow else variant.mode}-{k}", env,
                            schema=schema, mode=variant.mode, base_url=f"{model_url}/v1")
                        replicas.append(replica)
                        logs.append(replica.process.err)
                        result.startup_s.append(took)
                        warm = Phase(variant.mode, 1, 1, 1, variant.latency_s)
                        await _user(client, [replica.url], f"warm-{variant.name}-{k}", 0, 1,
                                    warm)
                        if warm.failed:
                            raise RuntimeError(f"replica {k} ({variant.name}) failed its "
                                               f"warm-up: {warm.failed[0]}")
                    left = deadline - time.monotonic()
                    if left < 5:
                        result.not_measured.append(f"{variant.name} x {n}")
                        continue
                    phase = Phase(variant.mode, n, threads, variant.messages,
                                  variant.latency_s, slow=variant.slow)
                    own = _phase_timeout(phase)
                    await _phase(client, replicas[:n], phase, model=model,
                                 model_url=model_url, postmaster=server_pid, db=db,
                                 schema=schema, timeout_s=min(own, left),
                                 cut_by_budget=left < own, token=token)
                    result.phases.append(phase)
                for replica in replicas:
                    result.exit_codes.append(await stop(replica.process))
                replicas = []
            for _, model_url in models.values():
                requests, connections = await _model_calls(client, model_url)
                result.model_requests += requests
                result.model_connections += connections
        await db.check(schema, result)
    finally:
        for replica in replicas:
            kill(replica.process)
        for model, _ in models.values():
            kill(model)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    result.log_problems += _log_problems(logs)
    return result
