"""What a soak prints: a summary of what it did, or each violation with the seed, the
invariant, the thread and run, and the fault history around it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .faults import Faults
from .invariants import INVARIANTS, Stored, Violation
from .model import Model
from .plan import Plan
from .system import History
from .workload import Workload

__all__ = ["Outcome", "summary", "violations"]


@dataclass
class Outcome:
    store: str
    violations: list[Violation]
    known: list[Violation]
    lines: list[str] = field(default_factory=list)


def _count(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


def summary(plan: Plan, workload: Workload, faults: Faults, model: Model, stored: Stored,
            elapsed_s: float) -> list[str]:
    sent = list(workload.sent.values())
    accepted = [s for s in sent if s.run_id]
    resends = sum(len(s.attempts) for s in sent)
    routes = Counter(str(s.op.route) for s in sent)
    effects = Counter(f"{r['tool']}{'' if r['applied'] or r['tool'] == 'look' else '(no-op)'}"
                      for r in stored.ledger)
    states = Counter(r["state"] for r in stored.runs)
    cancels = Counter(str(c) for s in sent for c in s.cancelled)
    decisions = Counter(f"{'approve' if a else 'deny'} {st}" for s in sent for a, st in s.decided)
    lines = [
        f"{plan.store}: {plan.replicas} replica(s), {len(plan.threads)} threads, "
        f"{elapsed_s:.0f} s",
        f"  messages   {len(sent)} sent ({_count(routes)}), {len(accepted)} acknowledged, "
        f"{resends} resends",
        f"  runs       {len(stored.runs)} ({_count(states)})",
        f"  cancels    {_count(cancels)}",
        f"  decisions  {_count(decisions)} ({workload.clicked} by buttons); janitor "
        f"denials {len(workload.janitor_denied)}",
        f"  effects    {_count(effects)}",
        f"  model      {_count(model.outcomes)}",
        f"  faults     {_count(faults.done)}; skipped {_count(faults.skipped)}",
        f"  invariants {', '.join(str(k) for k in INVARIANTS)} checked over "
        f"{sum(len(e) for e in stored.entries.values())} entries in "
        f"{len(stored.entries)} threads, {len(stored.ledger)} ledger lines, "
        f"{len(stored.leases)} leases held at the end",
    ]
    if faults.surprises:
        lines.append(f"  surprises  {len(faults.surprises)} (not invariants, worth a look):")
        lines += [f"    {s}" for s in faults.surprises[:20]]
    return lines


def violations(plan: Plan, found: list[Violation], history: History, work: Path,
               plan_file: Path) -> list[str]:
    lines = [f"chaos: {len(found)} violation(s) on {plan.store}, seed {plan.seed}"]
    known = Counter(v.known for v in found if v.known)
    if known:
        lines.append(f"  of which known (chaos/README.md, not failing the soak): {_count(known)}")
    for v in sorted(found, key=lambda v: v.known is not None)[:25]:
        lines += [
            f"--- invariant {v.invariant}: {INVARIANTS[v.invariant]}"
            + (f" [known: {v.known}]" if v.known else ""),
            f"    seed {plan.seed}  thread {v.thread}  run {v.run}",
            f"    {v.what}",
            "    faults around it:" if v.at is not None else "    the last faults:",
            *history.around(v.at),
        ]
    rest = sorted(found, key=lambda v: v.known is not None)[25:]
    if rest:  # each said in a line: none hidden (seed 10404 hid 6 behind "and 6 more")
        lines.append(f"... and {len(rest)} more, a line each:")
        lines += [f"    invariant {v.invariant}"
                  + (f" [known: {v.known}]" if v.known else "")
                  + f"  thread {v.thread}  run {v.run}: {v.what}" for v in rest]
    if any(v.known is None for v in found):
        lines.append(f"work dir kept: {work} (replica logs, ledger, model requests); "
                     f"replay: python -m chaos --replay {plan_file}")
    return lines
