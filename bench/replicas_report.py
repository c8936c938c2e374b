"""Workload 9's rows: messages/s for 1, 2, 3 replicas against the ideal and against one
replica of the same run, the hand-offs between replicas, where the CPU went, what the
database's connections did, and a sentence on where the limit is."""

from __future__ import annotations

import itertools
import textwrap
from statistics import median

from .handoffs import percentile
from .replicas_figures import Phase, ReplicasResult
from .table import Row, verdict

__all__ = ["limit", "replicas_rows"]

GROWTH = 1.1
"""``concurrency = "global"``: where messages/s stop growing by this much a replica more,
the bench says where the limit is."""
CPU_SPENT = 0.75
"""The share of the cores (or of one core, for one replica's process) past which the CPU is
read as the limit."""
GLOBAL_TARGETS = {2: 1.8, 3: 2.5}
"""``concurrency = "global"``: messages/s against one replica (issue 53)."""
THREAD_TARGET = 0.95
"""``concurrency = "thread"``: more replicas never make it slower (issue 53; the ideal is
1.00x, one replica already running every thread at once)."""
HANDOFF_MS = {50: 50.0, 99: 250.0}
"""A hand-off's percentile: at most this many ms (issue 53)."""
SHOWN_PROBLEMS = 8


def limit(p: Phase, cores: int) -> str:
    """Where ``p``'s limit is, from its own figures. The CPU counts as spent when the
    machine's cores were busy or taken by the hypervisor (steal) ``CPU_SPENT`` of the time,
    or one replica's process (its event loop) used that much of a core: queues for a core
    grow long well before it is busy all the time. With the cores and the database idle, a
    message that took much longer than its model calls was waiting."""
    busy = (p.machine_cores + p.steal_cores) / cores
    ours = (f"replicas {sum(p.replica_cores):.2f}, postgres "
            f"{'?' if p.db_cores is None else f'{p.db_cores:.2f}'}, "
            f"model {p.model_cores:.2f}, bench clients {p.client_cores:.2f}")
    db = "" if p.db is None else (
        f"; the replicas' {p.db.connections:.1f} database connections were busy "
        f"{p.db.busy:.2f} at a time (I/O {p.db.io:.2f}, row locks {p.db.lock:.2f}, LWLocks "
        f"{p.db.lwlock:.2f}), waiting on the replica mid-transaction "
        f"{p.db.idle_in_transaction:.2f}")
    share = f"{p.per_second / p.ideal_per_second:.0%} of ideal"
    if busy >= CPU_SPENT:
        others = max(0.0, p.machine_cores - p.ours_cores)
        return (f"the CPU, not the database: {p.replicas} replica(s) at {share} with the "
                f"machine's {cores} cores {busy:.0%} busy or stolen (steal {p.steal_cores:.2f}; "
                f"cores: {ours}; other processes {others:.2f}){db}")
    if p.replica_cores and max(p.replica_cores) >= CPU_SPENT:
        return (f"one replica's event loop ({max(p.replica_cores):.2f} of a core), at {share} "
                f"(cores: {ours}){db}")
    if p.db is not None and p.db.busy >= 0.5 * p.replicas:
        return f"the database, at {share} (cores: {ours}){db}"
    idle = f"the machine's {cores} cores {busy:.0%} busy or stolen ({ours}){db}"
    if p.beyond_ms > max(50.0, 500 * p.latency_s):
        h = p.handoffs
        seen = "" if h is None else "; replies p99 " \
            f"{percentile(h.reply_ms, 99):.0f} ms after their run's end" + (
                "" if not h.handoff_ms else f", hand-offs p50 "
                f"{percentile(h.handoff_ms, 50):.0f} ms, p99 "
                f"{percentile(h.handoff_ms, 99):.0f} ms")
        return (f"waiting, not the CPU nor the database: at {share} each message took "
                f"{p.beyond_ms:.0f} ms beyond the model's two calls{seen}; {idle}")
    return (f"neither the CPU nor the database: at {share}, the time is the model's latency "
            f"and each message's own trips; {idle}")


def _cores(p: Phase) -> str:
    each = "+".join(f"{c:.2f}" for c in p.replica_cores)
    pg = "?" if p.db_cores is None else f"{p.db_cores:.2f}"
    if p.backend_cores is not None and p.postgres_cores is not None:
        pg += f" (server {p.postgres_cores:.2f})"
    return (f"  cores: replicas {each}, postgres {pg}, model {p.model_cores:.2f}, "
            f"clients {p.client_cores:.2f}")


def _handoff_rows(name: str, p: Phase, base: Phase, cores: int) -> list[Row]:
    h, one = p.handoffs, base.handoffs
    if h is None:
        return []
    rows: list[Row] = []
    if p.replicas == 1:
        rows += [Row(name, f"  ms from a message's acceptance to its run's start, p{q} "
                     "(one replica)", f"{percentile(h.same_ms, q):.0f}") for q in HANDOFF_MS]
    for q, most in HANDOFF_MS.items() if p.replicas > 1 else ():
        value = percentile(h.handoff_ms, q)
        rows.append(Row(name, f"  hand-off ms, p{q} ({len(h.handoff_ms)}): acceptance to run "
                        "start, the previous message run by another replica",
                        f"{value:.0f}",
                        "" if one is None else f"{percentile(one.same_ms, q):.0f}", "",
                        f"<= {most:g} ms", verdict(value, at_most=most), why=limit(p, cores)))
    rows.append(Row(name, "  ms from a run's end to its reply at the user, p99 (p50 "
                    f"{percentile(h.reply_ms, 50):.0f})", f"{percentile(h.reply_ms, 99):.0f}"))
    if h.elsewhere:
        rows.append(Row(name, "  runs driven by another replica than the one that took the "
                        "message", f"{h.elsewhere}"))
    if h.unmatched:
        rows.append(Row(name, "  threads left out of the hand-offs (a message failed)",
                        f"{h.unmatched}"))
    return rows


def _phase_rows(name: str, p: Phase, base: Phase, previous: Phase | None,
                cores: int) -> list[Row]:
    plural = "replica" if p.replicas == 1 else "replicas"
    cut = " (CUT at the budget)" if p.cut_by_budget else " (TIMED OUT)" if p.timed_out else ""
    model = f", {p.latency_s * 1000:g} ms model" if p.slow else ""
    rows = [Row(name, f'concurrency="{p.mode}"{model}, {p.replicas} {plural}, {p.threads} x '
                f"{p.messages} msgs: messages/s{cut}",
                f"{p.per_second:.1f}", f"{p.ideal_per_second:.1f}",
                f"{p.per_second / p.ideal_per_second:.1%}")]
    if previous is not None and base.per_second:
        ideal = p.ideal_per_second / base.ideal_per_second
        least = GLOBAL_TARGETS.get(p.replicas, 0.83 * p.replicas) if p.mode == "global" \
            else THREAD_TARGET
        ratio = p.per_second / base.per_second
        rows.append(Row(name, f"  against 1 replica of this run (ideal {ideal:.2f}x)",
                        f"{p.per_second:.1f}", f"{base.per_second:.1f}", f"{ratio:.2f}x",
                        f">= {least:g}x", verdict(ratio, at_least=least), why=limit(p, cores)))
    if p.per_second:
        each = "per replica" if p.mode == "global" else "per thread"
        rows.append(Row(name, f"  ms a message beyond the model's two calls ({each})",
                        f"{p.beyond_ms:.0f}"))
    rows += _handoff_rows(name, p, base, cores)
    rows.append(Row(name, f"  cores busy, the whole machine (steal {p.steal_cores:.2f})",
                    f"{p.machine_cores:.2f}", f"{cores}", f"{p.machine_cores / cores:.0%}"))
    rows.append(Row(name, _cores(p), f"{p.ours_cores:.2f}"))
    if p.per_second:
        ms = 1000 / p.per_second
        pg = "" if p.db_cores is None else f", postgres {p.db_cores * ms:.0f}"
        rows.append(Row(name, f"  CPU ms a message: replicas {sum(p.replica_cores) * ms:.0f}"
                        f"{pg}, all of the above {p.ours_cores * ms:.0f}; at that, {cores} "
                        "cores make msgs/s", f"{cores / (p.ours_cores / p.per_second):.0f}"))
    if p.db is not None:
        d = p.db
        rows.append(Row(name, f"  db connections busy: running {d.running:.2f}, I/O {d.io:.2f}, "
                        f"locks {d.lock:.2f}+{d.lwlock:.2f}LW; on replica "
                        f"{d.idle_in_transaction:.2f}, idle {d.idle:.1f}", f"{d.busy:.2f}"))
        if d.waits:
            top = ", ".join(f"{w} {n}" for w, n in d.waits.most_common(4))
            rows.append(Row(name, f"    waits seen in {d.samples} samples: {top}"[:96], ""))
    server = "" if p.commits_per_s is None or p.wal_syncs_per_s is None else (
        f"server-wide {p.commits_per_s:.0f} commits/s, {p.wal_syncs_per_s:.0f} WAL syncs/s; ")
    if p.timed_out:  # runs still in flight at the cut made calls too
        rows.append(Row(name, f"  {server}model calls", f"{p.model_calls}"))
    else:
        rows.append(Row(name, f"  {server}model calls a message",
                        f"{p.model_calls / max(1, p.done + len(p.failed)):.2f}", "2.00"))
    if p.model_calls:
        rows.append(Row(name, "  model calls per new connection to the model server",
                        f"{p.model_calls / max(1, p.model_connections):.2f}"))
    if p.failed:
        rows.append(Row(name, f"  FAILED messages (first: {p.failed[0][:90]})",
                        f"{len(p.failed)}"))
    return rows


def _limit_rows(name: str, text: str) -> list[Row]:
    return [Row(name, ("  " if i == 0 else "    ") + line, "")
            for i, line in enumerate(textwrap.wrap(text, 84))]


def replicas_rows(r: ReplicasResult) -> list[Row]:
    """Workload 9: the figures against issue 53's targets, and where the limit is."""
    name = f"9 replicas, {r.threads} threads, {r.latency_s * 1000:g} ms model"
    if r.skipped is not None:
        return [Row(name, f"skipped: {r.skipped}", "-")]
    rows: list[Row] = []
    for variant in dict.fromkeys((p.mode, p.slow) for p in r.phases):
        phases = [p for p in r.phases if (p.mode, p.slow) == variant]
        previous: Phase | None = None
        for p in phases:
            rows += _phase_rows(name, p, phases[0], previous, r.cores)
            if p.mode == "thread":  # where each one's limit is: the CPU at 1, or waiting
                plural = "replica" if p.replicas == 1 else "replicas"
                rows += _limit_rows(name, f"limit at {p.replicas} {plural}: "
                                    f"{limit(p, r.cores)}")
            previous = p
        if variant[0] == "global" and len(phases) > 1:
            first_flat = next((p for a, p in itertools.pairwise(phases)
                               if p.per_second < GROWTH * a.per_second), None)
            where = first_flat or phases[-1]
            label = (f"stops growing at {where.replicas}" if first_flat
                     else f"still growing at {where.replicas}")
            rows += _limit_rows(name, f"limit: {label} replicas: {limit(where, r.cores)}")
    if r.startup_s:
        rows.append(Row(name, "replica start until Ready, s (median; max)",
                        f"{median(r.startup_s):.1f}", "", f"{max(r.startup_s):.1f}"))
    exits = ", ".join("killed" if c is None else str(c) for c in r.exit_codes)
    rows.append(Row(name, f"replicas' exit status after SIGTERM: {exits}", ""))
    if r.not_measured:
        rows.append(Row(name, f"not measured (over the {r.budget_s:g} s budget): "
                        + ", ".join(r.not_measured), "-"))
    if r.wrong_threads is not None:
        rows.append(Row(name, f"threads whose entries are not 4 a message (of "
                        f"{r.checked_threads}; timed-out phases left out)",
                        f"{r.wrong_threads}", "0"))
    if r.run_states:
        states = ", ".join(f"{s} {n}" for s, n in sorted(r.run_states.items()))
        rows.append(Row(name, f"runs by state: {states}", ""))
    problems = sum(n for n, _ in r.log_problems)
    rows.append(Row(name, "warnings and errors in the replicas' logs", f"{problems}", "0"))
    rows += [Row(name, f"  {n}x {what[:110]}", "") for n, what in
             r.log_problems[:SHOWN_PROBLEMS]]
    return rows

