"""``python -m bench [--quick] [--n N] [--synchronous S] [--only W,...] [--dir DIR]``

Runs the workloads of issue 4 and prints one table on stdout (progress goes to
stderr). Figures are compared with baselines measured in the same run; nothing
is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from bot.app import settle_heap
from runtime.stores.sqlite import Synchronous

from .agents import agents_rows, run_agents
from .collector import collector_rows, run_collector
from .concurrency import BURST_WAYS, SLOW_DISK_S, ConcurrencyResult, run_burst, run_concurrency
from .files import files_rows, run_files
from .memories import memories_rows, run_memories
from .memory import MemoryResult, measure, prepare_idle, prepare_long
from .postgres import run_postgres
from .replicas import run_replicas
from .report import (
    burst_rows,
    concurrency_rows,
    cpu_rows,
    flush_way_rows,
    memory_rows,
    postgres_rows,
    replicas_rows,
    resume_rows,
    schedules_rows,
    slack_rows,
    stream_rows,
    sync_rows,
    thread_rows,
    traced_rows,
)
from .resume import run_resume
from .schedules import run_schedules
from .slack import run_slack
from .slowloris import run_slowloris, slowloris_rows
from .stream import run_stream
from .syncs import count_syncs
from .table import Row, render
from .thread import run_flush_ways, run_rounds, run_traced

WORKLOADS = ("thread", "resume", "concurrency", "memory", "slack", "schedules", "postgres",
             "replicas", "slowloris", "stream", "files", "agents", "collector", "memories")


@dataclass(frozen=True)
class Sizes:
    threads: tuple[int, ...]
    load_entries: int
    recover_runs: int
    users: int
    messages: int
    latency_s: float
    memory_n: int
    idle_threads: int
    long_entries: tuple[int, int]
    slack_events: int
    schedules: int
    schedules_due: int
    schedule_rounds: int
    replica_users: int
    replica_messages: int
    replica_counts: tuple[int, ...]
    replica_thread_messages: int
    """Workload 9's messages per thread in thread mode (short phases: more of them)."""
    replica_slow_latency_s: float
    """Workload 9's thread-mode variant with a slow model (1 and 2 replicas)."""
    slowloris_idle: int
    slowloris_requests: int
    stream_replies: int
    files_messages: int
    files_distinct: int
    files_bytes: int
    agents_messages: int
    agents_prior: int
    rounds: int
    """Interleaved rounds of each comparison of workload 1 (median and range printed)."""
    few_users: int
    """Workload 4's smaller thread-mode case."""
    burst_rounds: int
    """Interleaved rounds of "50 threads at once" against one thread, each way: a round
    is short (one thread's ten messages take ~15 ms), so more of them."""
    memories: int
    """Workload 15's memories in the store a recall searches."""
    memory_queries: int


FULL = Sizes(threads=(300, 3000), load_entries=10_000, recover_runs=1_000, users=50,
             messages=10, latency_s=0.1, memory_n=3000, idle_threads=10_000,
             long_entries=(1_000, 100_000),
             slack_events=300, schedules=1000, schedules_due=100, schedule_rounds=5,
             replica_users=30, replica_messages=4, replica_counts=(1, 2, 3),
             replica_thread_messages=8, replica_slow_latency_s=1.0,
             slowloris_idle=500, slowloris_requests=1000, stream_replies=20,
             files_messages=100, files_distinct=10, files_bytes=1_000_000,
             agents_messages=600, agents_prior=20_000, rounds=3, few_users=8,
             burst_rounds=9, memories=100_000, memory_queries=300)
QUICK = Sizes(threads=(60,), load_entries=1_000, recover_runs=50, users=5, messages=3,
              latency_s=0.02, memory_n=60, idle_threads=200, long_entries=(200, 2_000),
              slack_events=20,
              schedules=100, schedules_due=10, schedule_rounds=1,
              replica_users=4, replica_messages=2, replica_counts=(1, 2),
              replica_thread_messages=2, replica_slow_latency_s=0.2,
              slowloris_idle=50, slowloris_requests=100, stream_replies=2,
              files_messages=10, files_distinct=3, files_bytes=200_000,
              agents_messages=30, agents_prior=2_000, rounds=1, few_users=3,
              burst_rounds=1, memories=10_000, memory_queries=100)


def _progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _run(sizes: Sizes, only: set[str], workdir: Path, sync: Synchronous) -> list[Row]:
    rows: list[Row] = []
    if "thread" in only:
        for n in sizes.threads:
            _progress(f"workloads 1+2: a thread of {n:,} messages, maiden, the floor and the "
                      f"earlier (aiosqlite) floor, {sizes.rounds} rounds")
            rows += thread_rows(await run_rounds(workdir, n, sync, sizes.rounds,
                                                 earlier_floor=True))
        n = sizes.threads[0]
        _progress(f"workloads 1+2: the fsync calls of {n:,} messages each, under strace")
        rows += sync_rows(count_syncs(workdir, n, sync))
        _progress(f"workloads 1+2 without flushes (synchronous=off): the CPU, {sizes.rounds} "
                  "rounds")
        rows += cpu_rows(await run_rounds(workdir, n, "off", sizes.rounds))
        if sync in ("full", "extra"):
            _progress("workloads 1+2 with durable commits flushed by maiden's rule, always "
                      "apart, on the loop's thread, on the writer's, interleaved")
            rows += flush_way_rows(await run_flush_ways(workdir, n, sync, sizes.rounds))
        _progress("workloads 1+2 untraced, then traced ([otel]), interleaved")
        rows += traced_rows(await run_traced(workdir, n, sync, sizes.rounds))
    if "resume" in only:
        _progress(f"workload 3: load {sizes.load_entries:,} entries, "
                  f"recover {sizes.recover_runs:,} runs")
        rows += resume_rows(await run_resume(workdir, sizes.load_entries, sizes.recover_runs,
                                             sync))
    if "concurrency" in only:
        results: list[ConcurrencyResult] = []
        _progress(f"workload 4: {sizes.few_users} threads x {sizes.messages} messages, "
                  'concurrency="thread"')
        results.append(await run_concurrency(
            workdir, "thread", threads=sizes.few_users, messages=sizes.messages,
            latency_s=sizes.latency_s, synchronous=sync))
        for mode in ("thread", "global"):
            _progress(f"workload 4: {sizes.users} threads x {sizes.messages} messages, "
                      f'concurrency="{mode}"')
            results.append(await run_concurrency(
                workdir, mode, threads=sizes.users, messages=sizes.messages,
                latency_s=sizes.latency_s, synchronous=sync))
        rows += concurrency_rows(results)
        _progress(f"workload 4: {sizes.users} threads at once against one, zero-latency model")
        bursts = [await run_burst(workdir, threads=sizes.users, messages=sizes.messages,
                                  synchronous=sync, flush=flush, rounds=sizes.burst_rounds)
                  for flush in BURST_WAYS]
        if sync in ("full", "extra"):
            _progress(f"workload 4: the same on a slower disk (each flush of the log "
                      f"{SLOW_DISK_S * 1000:g} ms longer)")
            bursts.append(await run_burst(workdir, threads=sizes.users,
                                          messages=sizes.messages, synchronous=sync,
                                          flush="apart", rounds=sizes.burst_rounds,
                                          slow_disk_s=SLOW_DISK_S))
        rows += burst_rows(bursts)
    if "memory" in only:
        _progress(f"workload 5: peak RSS (a subprocess per case; preparing "
                  f"{sizes.idle_threads:,} idle threads)")
        await prepare_idle(workdir / "memory-idle.db", sizes.idle_threads)
        for entries in sizes.long_entries:
            await prepare_long(workdir, entries)
        memory: list[MemoryResult] = [
            measure("empty", 1, workdir, sync),
            measure("thread", sizes.memory_n, workdir, sync),
            measure("idle", sizes.idle_threads, workdir, sync),
            *(measure("long", entries, workdir, sync) for entries in sizes.long_entries),
        ]
        rows += memory_rows(memory)
    if "slack" in only:
        _progress(f"workload 6: {sizes.slack_events} Slack events acked while a run holds "
                  "the lock")
        rows += slack_rows(await run_slack(workdir, sizes.slack_events, sync))
    if "schedules" in only:
        _progress(f"workload 7: {sizes.schedules:,} schedules at startup; "
                  f"{sizes.schedules_due} due in the same minute")
        rows += schedules_rows(await run_schedules(
            workdir, sync, schedules=sizes.schedules, due=sizes.schedules_due,
            rounds=sizes.schedule_rounds))
    if "postgres" in only:
        n = sizes.threads[0]
        _progress(f"workload 8: a thread of {n:,} messages on PostgreSQL beside SQLite")
        rows += postgres_rows(await run_postgres(workdir, n, sync))
    if "replicas" in only:
        _progress(f"workload 9: {sizes.replica_users} threads x {sizes.replica_messages} "
                  f"messages through {', '.join(map(str, sizes.replica_counts))} `maiden run` "
                  "replicas on PostgreSQL, global then thread mode, then thread mode with a "
                  f"{sizes.replica_slow_latency_s:g} s model")
        rows += replicas_rows(await run_replicas(
            workdir, threads=sizes.replica_users, messages=sizes.replica_messages,
            latency_s=sizes.latency_s, counts=sizes.replica_counts,
            thread_messages=sizes.replica_thread_messages,
            slow_latency_s=sizes.replica_slow_latency_s))
    if "slowloris" in only:
        _progress(f"workload 10: /healthz with {sizes.slowloris_idle} half-sent requests "
                  "held open")
        rows += slowloris_rows(await run_slowloris(
            workdir, idle=sizes.slowloris_idle, requests=sizes.slowloris_requests))
    if "stream" in only:
        _progress(f"workload 11: {sizes.stream_replies} replies streamed into Slack and "
                  "Discord, and the same unstreamed")
        rows += stream_rows(await run_stream(workdir, sizes.stream_replies))
    if "files" in only:
        _progress(f"workload 12: {sizes.files_messages} Slack messages, each with one of "
                  f"{sizes.files_distinct} images of {sizes.files_bytes / 1e6:g} MB")
        rows += files_rows(await run_files(workdir, sizes.files_messages, sizes.files_distinct,
                                           sizes.files_bytes, sync))
    if "agents" in only:
        _progress(f"workload 13: {sizes.agents_messages} messages, one agent against two with "
                  f"routes, and with spend caps over {sizes.agents_prior:,} runs")
        rows += agents_rows(await run_agents(workdir, sizes.agents_messages,
                                             sizes.agents_prior, sync))
    if "collector" in only:
        _progress(f"workload 14: {sizes.users} threads at once, the collector tuned and not, "
                  f"{sizes.burst_rounds} rounds")
        rows += collector_rows(await run_collector(
            workdir, users=sizes.users, messages=sizes.messages, synchronous=sync,
            rounds=sizes.burst_rounds))
    if "memories" in only:
        _progress(f"workload 15: recall among {sizes.memories:,} memories (and 1,000), "
                  f"{sizes.memory_queries} questions; recall@5 of planted facts")
        rows += memories_rows(await run_memories(workdir, sizes.memories,
                                                 sizes.memory_queries))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="maiden's benchmarks: one table, each figure beside a baseline of the "
                    "same run and its target. Nothing is asserted.")
    parser.add_argument("--quick", action="store_true", help="a small run for CI (seconds)")
    parser.add_argument("--n", type=int, help="messages in workload 1 (default 300; the full "
                        "run also does 3,000)")
    parser.add_argument("--synchronous", default="full", choices=["off", "normal", "full",
                                                                  "extra"],
                        help="PRAGMA synchronous, for maiden and the floor alike")
    parser.add_argument("--only", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--dir", type=Path, help="where the databases go (default: a temp dir)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= set(WORKLOADS):
        parser.error(f"--only takes {','.join(WORKLOADS)}")
    sizes = QUICK if args.quick else FULL
    if args.n is not None:
        sizes = Sizes(**{**sizes.__dict__, "threads": (args.n,)})
    sync = cast(Synchronous, args.synchronous)

    started = time.perf_counter()
    settle_heap()  # what the imports made, out of the collector's way, as `maiden run` does
    with tempfile.TemporaryDirectory(prefix="maiden-bench-") as tmp:
        workdir = args.dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        rows = asyncio.run(_run(sizes, only, workdir, sync))
    print(f"maiden benchmarks{' (--quick)' if args.quick else ''}: {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
          f"synchronous={sync}, {time.perf_counter() - started:.0f} s")
    print(render(rows))


if __name__ == "__main__":
    main()
