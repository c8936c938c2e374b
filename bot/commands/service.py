"""`maiden run`, `schedules` and `migrate`: serve, look at the schedules, move the store."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import sys

from runtime import NotFound, RunState

from ..config import LoadedConfig
from .common import EXIT_OK, UsageError, report

__all__ = ["COMMANDS"]

EXIT_WITHIN_S = 20.0
"""How long `maiden run` may take to exit once it has stopped (see ``_run``)."""

_OWN_FILES = 256
"""Descriptors maiden needs besides the HTTP connections (store, channels, tools)."""


async def _run(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..app import serve
    from ..limits import raise_open_files

    http = loaded.config.http
    raise_open_files(http.max_connections + _OWN_FILES if http.enabled else 0)
    await serve(loaded, context=args.log_context)
    # Stopped: what is left is the interpreter's own teardown, which waits for every worker
    # thread (a sync tool still running, say). Bounded, so that a supervisor's SIGTERM ends
    # the process: past it, every thread's stack is printed (what held it up) and it exits.
    faulthandler.dump_traceback_later(EXIT_WITHIN_S, exit=True)
    return EXIT_OK


async def _schedules(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Each schedule: name, crontab, zone, next three fires (ISO 8601 with offset), its last
    slot and what came of it, where its answer goes, and whether it is from the config or
    from chat. ``run NAME``: one run now, waited for and printed like `maiden send`."""
    from schedules import statuses

    from ..app import open_app
    from ..jobs import status_lines

    loaded.config.read_schedules()  # a bad [[schedules]] is reported before the store opens
    command = getattr(args, "schedules_command", None)
    if command == "run":
        return await _run_schedule(loaded, args)
    if command in ("pause", "resume", "delete"):
        return await _change_schedule(loaded, command, args.name)
    async with open_app(loaded, recover=False, mcp=False) as app:
        await app.book.load()
        found = await statuses(app.book)
    if not found:
        print("no schedules (add [[schedules]] to the config, or ask the agent for one)")
        return EXIT_OK
    print("\n".join(status_lines(found, loaded.config.agent.timezone)))
    return EXIT_OK


async def _change_schedule(loaded: LoadedConfig, command: str, name: str) -> int:
    """Pause, resume or delete a schedule as its operator (any schedule; a config one is
    deleted from the config). A `maiden run` on the store sees it at its next look at the
    store; its slots decide from the record then."""
    from schedules import ScheduleError, statuses

    from ..app import open_app

    async with open_app(loaded, recover=False, mcp=False, writable=True) as app:
        try:
            if command == "delete":
                await app.book.delete(name, thread_id=None)
            else:
                await app.book.set_paused(name, command == "pause", thread_id=None)
        except ScheduleError as exc:
            raise UsageError(str(exc)) from None
        found = {s.schedule.name: s for s in await statuses(app.book)}
    if command == "delete":
        print(f"schedule {name!r} deleted")
    elif command == "pause":
        print(f"schedule {name!r} paused: no slot of it runs until `maiden schedules resume "
              f"{name}`")
    else:
        status = found.get(name)
        if status is not None and not status.active:
            print(f"schedule {name!r} resumed, but its definition disables it (enabled = "
                  "false)")
        else:
            upcoming = status.next_fires if status is not None else []
            when = f" ({upcoming[0].isoformat()})" if upcoming else ""
            print(f"schedule {name!r} resumed: it fires from its next slot{when}")
    return EXIT_OK


async def _run_schedule(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from schedules import Scheduler

    from ..app import open_app

    async with open_app(loaded, recover=False, serve=True, writable=True,
                        log_runs=args.verbose) as app:
        await app.book.load()
        scheduler = Scheduler(app.book, app.runtime, timers=False)  # not started: it only submits
        try:
            run = await scheduler.run_now(args.name)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
        run = await app.runtime.wait(run.id)
        if run.origin.target and run.state is RunState.COMPLETED:
            sent = [d for d in await app.runtime.records.deliveries(run_id=run.id)
                    if d.remote_id]
            where = ":".join([run.origin.channel, *run.origin.target.values()])
            note = "delivered" if sent else "to be delivered by `maiden run`"
            print(f"({note} to {where})", file=sys.stderr)
    return report(run)


async def _migrate(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from ..migrate import copy_store, missing_source, open_spec

    cfg, base = loaded.config.store, loaded.base_dir
    missing = missing_source(args.source, base)
    if missing is not None:  # checked before either store is opened: nothing is created
        raise UsageError(f"--from {args.source}: {missing}")
    source, target = open_spec(args.source, cfg, base), open_spec(args.target, cfg, base)
    async with contextlib.AsyncExitStack() as stack:
        for store in (source, target):
            await store.open()
            stack.push_async_callback(store.close)
        print(f"copying {args.source} into {args.target}")
        counts = await copy_store(source, target, progress=print)
    print(f"done, and the counts match: {counts.threads:,} threads, {counts.entries:,} "
          f"entries, {counts.runs:,} runs ({counts.transitions:,} state changes), "
          f"{counts.deliveries:,} outbox records, {counts.schedules:,} schedules, "
          f"{counts.notes:,} notes, {counts.memories:,} memories, {counts.votes:,} votes, "
          f"{counts.blobs:,} files")
    return EXIT_OK


COMMANDS = {"run": _run, "schedules": _schedules, "migrate": _migrate}
