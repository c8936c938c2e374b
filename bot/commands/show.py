"""`maiden threads`, `show`, `runs` and `usage`: read the store and print it."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

from runtime import CorruptStore, Records, Run, RunState, person_key, place_key

from ..config import LoadedConfig
from .common import EXIT_FAILED, EXIT_OK, UsageError

__all__ = ["COMMANDS", "SHOW_PAGE"]

T = TypeVar("T")


async def _threads(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..app import open_runtime

    limit = args.limit
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        threads = await runtime.records.threads(limit=None if limit is None else limit + 1)
    if not threads:
        print("no threads yet")
    for t in threads[:limit]:
        state = t.last_state or "-"
        print(f"{t.id!r}  entries={t.length} runs={t.runs} last={state}")
    if limit is not None and len(threads) > limit:
        print(f"(the {limit} most recently active; more with a higher --limit)")
    return EXIT_OK


SHOW_PAGE = 500


async def _show(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """A thread's entries and runs. A damaged store is shown as far as it can be read: each
    part that cannot be is marked where it would be, and the first reason ends the output
    on stderr (exit 1)."""
    from ..app import open_runtime

    read = _Readable()
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        records = runtime.records
        total = await read(records.thread_length(args.thread))
        runs = await read(records.runs(thread_id=args.thread))
        if not total and not runs and not read.damaged:
            print(f"no thread {args.thread!r}", file=sys.stderr)
            return EXIT_FAILED
        count = "?" if total is None else str(total)
        # Without its length (unreadable), --tail cannot apply.
        offset = 0 if total is None or args.tail is None else max(0, total - args.tail)
        tail = f" (the last {total - offset} shown)" if total is not None and offset else ""
        print(f"thread {args.thread!r}: {count} entries{tail}, "
              f"{'?' if runs is None else len(runs)} runs\n")
        named = await _show_entries(records, read, args.thread, offset, total)
        print("\nruns:")
        if runs is None:
            print("(the runs are unreadable)")
        if runs and tail:  # those of the entries shown, and any newer (queued) ones
            since = min((r.created_at for r in runs if r.id in named), default=0.0)
            runs = [r for r in runs if r.created_at >= since]
        await _show_runs(records, read, runs or [])
    if read.damaged:
        print(f"maiden: {read.damaged[0]}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


class _Readable:
    """Reads from a store that may be damaged: what cannot be read is None, and why is
    kept (``damaged``)."""

    def __init__(self) -> None:
        self.damaged: list[str] = []

    async def __call__(self, read: Coroutine[Any, Any, T]) -> T | None:
        try:
            return await read
        except CorruptStore as exc:
            self.damaged.append(str(exc))
            return None


async def _show_entries(records: Records, read: _Readable, thread_id: str, offset: int,
                        total: int | None) -> set[str]:
    """Print the thread's entries from ``offset`` on; the runs they are of."""
    from channels import render_entry

    named: set[str] = set()
    # Page by page: a thread of any length is shown in the same memory. Without its
    # length (unreadable), pages are read until a short one.
    while total is None or offset < total:
        page = await read(records.entries(thread_id, offset=offset, limit=SHOW_PAGE))
        if page is None:  # still show the runs: they say what happened
            print(f"(entries from {offset + 1} on are unreadable)")
            break
        for i, entry in enumerate(page, offset + 1):
            print(render_entry(i, entry))
            named.add(entry.run_id)
        offset += SHOW_PAGE
        if total is None and len(page) < SHOW_PAGE:
            break
    return named


async def _show_runs(records: Records, read: _Readable, runs: list[Run]) -> None:
    """Print each run with its transitions and decisions."""
    from channels import render_run, render_transition

    for run in runs:
        print(render_run(run))
        steps = await read(records.transitions(run.id))
        if steps is None:
            print("    (its transitions are unreadable)")
        for t in steps or []:
            print(render_transition(t))
        for d in run.decisions:
            verb = "approved" if d.approve else "denied"
            print(f"    decision: {verb} call {d.tool_call_id} by {d.by}"
                  + (f" ({d.reason})" if d.reason else ""))


async def _runs(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from channels import render_run

    from ..app import open_runtime

    states = [RunState(s) for s in args.state] if args.state else None
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        runs = await runtime.records.runs(thread_id=args.thread, states=states, limit=args.limit)
        steps = {run.id: await runtime.records.transitions(run.id) for run in runs
                 if run.recovery_attempts}  # why each was recovered
    if not runs:
        print("no runs")
    for run in runs:
        print(render_run(run, steps.get(run.id, ())))
    return EXIT_OK


def _since(text: str | None) -> float:
    if not text:
        return 0.0
    units = {"m": 60, "h": 3600, "d": 86400}
    if text[:-1].isdigit() and text[-1] in units:
        return time.time() - int(text[:-1]) * units[text[-1]]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r}: use an ISO date (2026-11-01) or an age "
                         "(24h, 7d)") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def _usage(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..app import open_runtime

    since = _since(args.since)
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        runs = [r for r in await runtime.records.runs() if r.created_at >= since]
        default = runtime.operator.agents.default.name
    group = args.by or "thread"
    key: Callable[[Run], str] = {
        "thread": lambda r: r.thread_id, "agent": lambda r: r.agent or default,
        "user": lambda r: person_key(r.origin), "place": lambda r: place_key(r.origin),
    }[group]
    totals: dict[str, list[float]] = {}
    for run in runs:
        row = totals.setdefault(key(run), [0, 0, 0, 0, 0.0])
        u = run.usage
        for i, value in enumerate((1, run.turns, u.input_tokens + u.cache_read_tokens
                                   + u.cache_creation_tokens, u.output_tokens, run.cost_usd)):
            row[i] += value
    print(f"{group:<40} {'runs':>6} {'turns':>6} {'input':>10} {'output':>10} {'cost $':>10}")
    for thread, (n, turns, inp, out, cost) in sorted(totals.items(), key=lambda kv: -kv[1][4]):
        print(f"{thread[:40]:<40} {n:>6.0f} {turns:>6.0f} {inp:>10.0f} {out:>10.0f} "
              f"{cost:>10.4f}")
    all_cost = sum(row[4] for row in totals.values())
    print(f"{'total':<40} {len(runs):>6} {'':>6} {'':>10} {'':>10} {all_cost:>10.4f}")
    return EXIT_OK


COMMANDS = {"threads": _threads, "show": _show, "runs": _runs, "usage": _usage}
