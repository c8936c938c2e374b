"""Workload 9's rows: messages/s for 1, 2, 3 replicas against the ideal and against one
replica of the same run, where the CPU went, what the database's connections did, and a
sentence on where the limit is."""

from __future__ import annotations

import itertools
import textwrap
from statistics import median

from .replicas import Phase, ReplicasResult
from .table import Row, verdict

__all__ = ["limit", "replicas_rows"]

GROWTH = 1.1
"""``concurrency = "global"``: each replica more should add at least this (the issue's
"messages/s should grow with replicas"); below it, the bench says where the limit is."""
SHOWN_PROBLEMS = 8


def limit(p: Phase, cores: int) -> str:
    """Where ``p``'s limit is, from its own figures. The CPU counts as spent when the
    machine's cores were busy or taken by the hypervisor (steal) 90% of the time."""
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
    if busy >= 0.9:
        others = max(0.0, p.machine_cores - p.ours_cores)
        return (f"the CPU, not the database: {p.replicas} replica(s) at {share} with the "
                f"machine's {cores} cores {busy:.0%} busy or stolen (steal {p.steal_cores:.2f}; "
                f"cores: {ours}; other processes {others:.2f}){db}")
    if p.replica_cores and max(p.replica_cores) >= 0.85:
        return (f"one replica's event loop ({max(p.replica_cores):.2f} of a core), at {share} "
                f"(cores: {ours}){db}")
    if p.db is not None and p.db.busy >= 0.5 * p.replicas:
        return f"the database, at {share} (cores: {ours}){db}"
    return (f"neither the CPU ({busy:.0%} of {cores} cores busy or stolen; {ours}) nor the "
            "database"
            f"{db}: at {share}, the time is the model's latency and each message's own trips")


def _cores(p: Phase) -> str:
    each = "+".join(f"{c:.2f}" for c in p.replica_cores)
    pg = "?" if p.db_cores is None else f"{p.db_cores:.2f}"
    if p.backend_cores is not None and p.postgres_cores is not None:
        pg += f" (server {p.postgres_cores:.2f})"
    return (f"  cores: replicas {each}, postgres {pg}, model {p.model_cores:.2f}, "
            f"clients {p.client_cores:.2f}")


def _phase_rows(name: str, p: Phase, base: Phase, previous: Phase | None,
                cores: int) -> list[Row]:
    plural = "replica" if p.replicas == 1 else "replicas"
    cut = " (CUT at the budget)" if p.cut_by_budget else " (TIMED OUT)" if p.timed_out else ""
    rows = [Row(name, f'concurrency="{p.mode}", {p.replicas} {plural}, {p.threads} x {p.messages} '
                f"msgs: messages/s{cut}",
                f"{p.per_second:.1f}", f"{p.ideal_per_second:.1f}",
                f"{p.per_second / p.ideal_per_second:.1%}")]
    if previous is not None and base.per_second:
        ideal = p.ideal_per_second / base.ideal_per_second
        target = ok = ""
        if p.mode == "global":
            target = f">= {GROWTH:g}x {previous.replicas}"
            ok = verdict(p.per_second, at_least=GROWTH * previous.per_second)
        rows.append(Row(name, f"  against 1 replica of this run (ideal {ideal:.2f}x)",
                        f"{p.per_second:.1f}", f"{base.per_second:.1f}",
                        f"{p.per_second / base.per_second:.2f}x", target, ok,
                        why=limit(p, cores)))
    if p.mode == "global" and p.per_second:
        beyond = (p.replicas / p.per_second - 2 * p.latency_s) * 1000
        rows.append(Row(name, "  ms a message beyond the model's two calls (per replica)",
                        f"{beyond:.0f}"))
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


def replicas_rows(r: ReplicasResult) -> list[Row]:
    """Workload 9 (no target but growth under global concurrency: the figures and where the
    limit is)."""
    name = f"9 replicas, {r.threads} threads, {r.latency_s * 1000:g} ms model"
    if r.skipped is not None:
        return [Row(name, f"skipped: {r.skipped}", "-")]
    rows: list[Row] = []
    for mode in dict.fromkeys(p.mode for p in r.phases):
        phases = [p for p in r.phases if p.mode == mode]
        previous: Phase | None = None
        for p in phases:
            rows += _phase_rows(name, p, phases[0], previous, r.cores)
            previous = p
        if mode == "global" and len(phases) > 1:
            first_flat = next((p for a, p in itertools.pairwise(phases)
                               if p.per_second < GROWTH * a.per_second), None)
            where = first_flat or phases[-1]
            label = (f"stops growing at {where.replicas}" if first_flat
                     else f"still growing at {where.replicas}")
            text = f"limit: {label} replicas: {limit(where, r.cores)}"
            rows += [Row(name, ("  " if i == 0 else "    ") + line, "")
                     for i, line in enumerate(textwrap.wrap(text, 84))]
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

