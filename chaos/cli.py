"""``python -m chaos``: arguments, the seed, one pass per store, the exit code."""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .disk import private_mounts
from .pgserver import unavailable
from .plan import Plan, make_plan
from .soak import PG_DSN, postgres_answers, soak

__all__ = ["main"]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos", description=(
        "A randomized fault soak over maiden replicas; invariants checked at the end."))
    length = p.add_mutually_exclusive_group()
    length.add_argument("--seconds", type=float, help="faults and messages per store (60)")
    length.add_argument("--minutes", type=float, help="the same, in minutes")
    p.add_argument("--seed", type=int, help="the seed (a random one, printed, otherwise)")
    p.add_argument("--store", choices=["postgres", "sqlite", "both"], default="both")
    p.add_argument("--replicas", type=int, default=3, help="on PostgreSQL (SQLite: one)")
    p.add_argument("--shared-postgres", action="store_true", help="PostgreSQL's pass on "
                   "MAIDEN_TEST_PG_DSN's server, never restarted (default: a server of its "
                   "own, restarted now and then, where the machine allows)")
    p.add_argument("--replay", type=Path, help="run a plan a soak wrote (plan-STORE.json)")
    p.add_argument("--workdir", type=Path, help="where logs and plans go (kept); default a "
                   "temporary dir, removed unless a violation is found")
    return p.parse_args(argv)


def _own_server(plan: Plan, shared_postgres: bool) -> bool | None:
    """Whether the PostgreSQL pass runs on a server of its own (if not, why, in one line);
    None: on none at all (the shared one does not answer either)."""
    why = "--shared-postgres" if shared_postgres else unavailable()
    if why is None:
        return True
    if not asyncio.run(postgres_answers()):
        print(f"chaos: postgres pass skipped: no PostgreSQL answers at "
              f"{PG_DSN.rsplit('@', 1)[-1]} (set MAIDEN_TEST_PG_DSN), and no server of its "
              f"own: {why}", flush=True)
        return None
    print(f"chaos: postgres pass on the shared server at {PG_DSN.rsplit('@', 1)[-1]}, "
          f"without pg_restart: {why}", flush=True)
    return False


def _small_disk(plans: list[Plan]) -> bool:
    """Whether the passes have a small disk to fill (if not, why, in one line): a mount
    namespace of the soak's own, made before anything starts a thread (``unshare`` refuses
    a process with threads, and a pass leaves some behind)."""
    if not any(f.kind == "disk_full" for plan in plans for f in plan.faults):
        return False
    why = private_mounts()
    if why is not None:
        print(f"chaos: no disk_full (the store's disk filled): {why}", flush=True)
    return why is None


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.replay is not None:
        plans = [Plan.load(args.replay)]
        print(f"chaos: seed {plans[0].seed} (replaying {args.replay})", flush=True)
    else:
        seed = args.seed if args.seed is not None else random.randrange(1 << 31)
        print(f"chaos: seed {seed}", flush=True)
        seconds = args.minutes * 60 if args.minutes else (args.seconds or 60.0)
        stores = ["postgres", "sqlite"] if args.store == "both" else [args.store]
        plans = [make_plan(seed, seconds, s, args.replicas if s == "postgres" else 1)
                 for s in stores]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    # The PostgreSQL pass's own server runs as postgres, and keeps its data under the work
    # dir (a temporary one is 0700): it may pass through, not list.
    work.chmod(work.stat().st_mode | 0o011)
    failed = interrupted = False
    try:
        disk = _small_disk(plans)
        for plan in plans:
            own = _own_server(plan, args.shared_postgres) if plan.store == "postgres" else False
            if own is None:
                continue
            started = time.monotonic()
            print(f"chaos: {plan.store} pass, {plan.seconds:.0f} s, {len(plan.ops)} messages, "
                  f"{len(plan.faults)} faults, concurrency {plan.concurrency}", flush=True)
            outcome = asyncio.run(soak(plan, work, own_server=own,
                                       small_disk=disk))
            print("\n".join(outcome.lines), flush=True)
            verdict = "FAILED" if outcome.violations else "clean"
            if outcome.known and not outcome.violations:
                verdict += f" but for {len(outcome.known)} known violation(s)"
            print(f"chaos: {plan.store} pass {verdict} in {time.monotonic() - started:.0f} s",
                  flush=True)
            failed = failed or bool(outcome.violations)
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("chaos: interrupted (every replica stopped)", file=sys.stderr)
        interrupted = True
        return 130
    finally:  # a temporary work dir goes, unless it holds what a violation needs
        if args.workdir is None and failed and not interrupted:
            print(f"chaos: work dir kept: {work}", flush=True)
        elif args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"chaos: seed {plans[0].seed}: {'violations found' if failed else 'no violation'}")
    return 1 if failed else 0
