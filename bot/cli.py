"""`maiden`: the command line. Imports only what the chosen command needs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from channels import ChannelRefused
from runtime import (
    ConfigError,
    CorruptStore,
    InvalidThreadId,
    MaidenError,
    NotFound,
    Origin,
    Run,
    RunError,
    RunState,
    make_undumpable,
)

from .config import LoadedConfig, load_config
from .logging import configure as configure_logging

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
_OWN_FILES = 256
"""Descriptors maiden needs besides the HTTP connections (store, channels, tools)."""

T = TypeVar("T")


class UsageError(MaidenError):
    """A command line that cannot be carried out as typed (exit 2)."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maiden", description="A durable, self-hosted AI agent.")
    p.add_argument("--config", default="agent.toml",
                   help="path to agent.toml (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    p.add_argument("--log-format", choices=["text", "json"], default="text",
                   help="log lines on stderr: readable text, or one JSON object per line "
                   "(default: %(default)s)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text)  # `COMMAND --help` too

    command("run", "recover unfinished runs, then serve everything configured: the HTTP "
            "API and console, Slack, Discord, schedules (until SIGINT/SIGTERM)")
    chat = command("chat", "talk to the agent in the terminal")
    chat.add_argument("--thread", default="terminal", help="thread id (default: %(default)s)")
    send = command("send", "send one message and print the reply")
    send.add_argument("thread")
    send.add_argument("text")
    command("threads", "list threads")
    show = command("show", "show a thread's entries and runs")
    show.add_argument("thread")
    runs = command("runs", "list runs")
    runs.add_argument("--state", choices=[s.value for s in RunState], action="append")
    runs.add_argument("--thread")
    runs.add_argument("--limit", type=_positive, default=50,
                      help="show the newest N runs (default: %(default)s)")
    approve = command("approve", "approve (or --deny) a call waiting for a person")
    approve.add_argument("run")
    approve.add_argument("call")
    approve.add_argument("--deny", action="store_true")
    approve.add_argument("--by", default="cli")
    approve.add_argument("--reason", default="")
    resume = command("resume", "run a failed, cancelled or timed-out run again")
    resume.add_argument("run")
    cancel = command("cancel", "cancel a run (wherever it is running)")
    cancel.add_argument("run")
    cancel.add_argument("--by", default="cli")
    usage = command("usage", "tokens and cost by thread")
    usage.add_argument("--since", help="an ISO date/time, or an age such as 24h or 7d")
    sched = command("schedules", "list the schedules: next fires, last slot")
    sched_sub = sched.add_subparsers(dest="schedules_command", metavar="[run NAME]")
    run_one = sched_sub.add_parser("run", help="run one schedule now and print its answer")
    run_one.add_argument("name")
    command("check", "validate the config and say what is configured")
    migrate = command("migrate", "copy a store into another (e.g. SQLite into PostgreSQL) "
                      "and verify the counts")
    migrate.add_argument("--from", dest="source", required=True, metavar="STORE",
                         help="sqlite:PATH, files:PATH or postgres")
    migrate.add_argument("--to", dest="target", default="postgres", metavar="STORE",
                         help="the same forms; postgres: [store] dsn_env and schema "
                         "(default: %(default)s)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status. Ctrl-C where the command does not handle it
    itself (while it starts, say) ends it with one line, never a traceback."""
    # First of all: from here on no process of our uid (a tool's command) can read this
    # one's environment or memory through /proc. See runtime.isolation.
    make_undumpable()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("maiden: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    level = logging.INFO if args.verbose or args.command == "run" else logging.ERROR
    configure_logging(args.log_format, level)
    try:
        loaded = load_config(args.config)
        args.log_context = configure_logging(args.log_format, level,
                                             secrets=_secret_values(loaded))
        if args.command == "check":
            from .check import check

            return check(loaded)
        if args.command != "migrate":
            _import_tools(loaded)
        code: int = asyncio.run(_COMMANDS[args.command](loaded, args))
        return code
    except ConfigError as exc:
        print(f"maiden: configuration error\n{exc.located(args.config)}", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, InvalidThreadId) as exc:
        print(f"maiden: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RunError as exc:
        print(f"maiden: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.reason == "invalid_message" else EXIT_FAILED
    except ChannelRefused as exc:  # a platform refused a token, scope or intent
        print(f"maiden: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MaidenError as exc:
        print(f"maiden: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (`maiden show t | head`): not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


async def _schedules(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """Each schedule: name, crontab, zone, next three fires (ISO 8601 with offset), its last
    slot and what came of it, where its answer goes, and whether it is from the config or
    from chat. ``run NAME``: one run now, waited for and printed like `maiden send`."""
    from schedules import statuses

    from .app import open_app
    from .jobs import status_lines

    loaded.config.read_schedules()  # a bad [[schedules]] is reported before the store opens
    if getattr(args, "schedules_command", None) == "run":
        return await _run_schedule(loaded, args)
    async with open_app(loaded, recover=False, mcp=False) as app:
        await app.book.load()
        found = await statuses(app.book)
    if not found:
        print("no schedules (add [[schedules]] to the config, or ask the agent for one)")
        return EXIT_OK
    print("\n".join(status_lines(found)))
    return EXIT_OK


async def _run_schedule(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from schedules import Scheduler

    from .app import open_app

    async with open_app(loaded, recover=False, serve=True, writable=True,
                        log_runs=args.verbose) as app:
        await app.book.load()
        scheduler = Scheduler(app.book, timers=False)  # not started: it only submits
        try:
            run = await scheduler.run_now(args.name)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
        run = await app.runtime.wait(run.id)
        if run.origin.target and run.state is RunState.COMPLETED:
            sent = [d for d in await app.runtime.deliveries(run_id=run.id) if d.remote_id]
            where = ":".join([run.origin.channel, *run.origin.target.values()])
            note = "delivered" if sent else "to be delivered by `maiden run`"
            print(f"({note} to {where})", file=sys.stderr)
    return _report(run)


def _import_tools(loaded: LoadedConfig) -> None:
    """Import the ``[tools] modules`` before the event loop starts: there a Ctrl-C stops a
    slow import at once, where inside ``asyncio.run`` it would wait for the import to end
    (the command then finds them imported)."""
    from runtime import ToolRegistry

    for module in loaded.config.tools.modules:
        ToolRegistry().add_module(module, loaded.base_dir)


def _secret_values(loaded: LoadedConfig) -> list[str]:
    """The values of every secret variable the config names (kept out of the logs)."""
    names = {*loaded.config.secret_envs().values(), "ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    return [value for name in names if (value := os.environ.get(name))]


async def _run(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from .app import serve
    from .limits import raise_open_files

    http = loaded.config.http
    raise_open_files(http.max_connections + _OWN_FILES if http.enabled else 0)
    await serve(loaded, context=args.log_context)
    return EXIT_OK


async def _chat(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from channels import chat

    from .app import open_runtime

    async with open_runtime(loaded, recover=False, serve=True, writable=True,
                            log_runs=args.verbose) as runtime:
        left = await chat(runtime, args.thread)
    return EXIT_INTERRUPTED if left == "interrupted" else EXIT_OK


async def _send(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """One message. Ctrl-C cancels the run (its tools stop) and says so; a second Ctrl-C
    leaves at once, the run left where it stands for the next start to carry on."""
    from channels.terminal import on_sigint

    from .app import open_runtime

    async with open_runtime(loaded, recover=False, serve=True, writable=True,
                            log_runs=args.verbose) as runtime:
        run = await runtime.submit(args.thread, args.text, origin=Origin(channel="cli"))
        waiting = asyncio.ensure_future(runtime.wait(run.id))
        interrupts = 0

        def interrupted() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1:
                print(f"\nmaiden: cancelling run {run.id} (Ctrl-C again to leave it as it is)",
                      file=sys.stderr)
                runtime.spawn(_cancel_run(runtime, run.id), name="maiden-cli-cancel")
            else:
                print(f"maiden: left run {run.id} as it is; `maiden run` (or the next command "
                      "on this thread) carries it on", file=sys.stderr)
                waiting.cancel()

        with on_sigint(interrupted):
            try:
                run = await waiting
            except asyncio.CancelledError:
                if interrupts < 2:
                    raise
                await runtime.close(grace_s=0)  # the run is released at its checkpoint
    if interrupts >= 2:
        # Leave now: a sync tool's thread cannot be stopped, and Python would wait for it
        # at exit. The store is closed; the run is where the next start carries it on.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    code = _report(run)
    return EXIT_INTERRUPTED if interrupts and run.state is RunState.CANCELLED else code


async def _cancel_run(runtime: Any, run_id: str) -> None:
    try:
        await runtime.cancel(run_id, by="terminal")
    except MaidenError as exc:
        print(f"maiden: {exc}", file=sys.stderr)


def _report(run: Run) -> int:
    if run.state is RunState.COMPLETED:
        print(run.reply or "")
        return EXIT_OK
    if run.state is RunState.AWAITING_APPROVAL and run.pending_approval is not None:
        p = run.pending_approval
        print(f"run {run.id} is waiting for approval ({p.reason}) of {p.name} "
              f"{json.dumps(p.arguments, ensure_ascii=False)}:\n"
              f"  maiden approve {run.id} {p.tool_call_id}   (or --deny)", file=sys.stderr)
        return EXIT_PAUSED
    if run.state in (RunState.RUNNING, RunState.AWAITING_TOOL):
        print(f"run {run.id} is still {run.state} in the serving process; follow it with "
              f"`maiden runs --thread {run.thread_id!r}`", file=sys.stderr)
        return EXIT_OK
    if run.state is RunState.QUEUED:
        print(f"run {run.id} is queued: the thread has a run waiting for approval "
              "(see `maiden runs --state awaiting_approval`)", file=sys.stderr)
        return EXIT_PAUSED
    print(f"run {run.id} {run.state}: {run.reason}" + (f": {run.error}" if run.error else ""),
          file=sys.stderr)
    return EXIT_FAILED


async def _threads(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from .app import open_runtime

    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        threads = await runtime.threads()
    if not threads:
        print("no threads yet")
    for t in threads:
        state = t.last_state or "-"
        print(f"{t.id!r}  entries={t.length} runs={t.runs} last={state}")
    return EXIT_OK


SHOW_PAGE = 500


async def _show(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """A thread's entries and runs. A damaged store is shown as far as it can be read: each
    part that cannot be is marked where it would be, and the first reason ends the output
    on stderr (exit 1)."""
    from channels import render_entry, render_run, render_transition

    from .app import open_runtime

    damaged: list[str] = []

    async def readable(read: Coroutine[Any, Any, T]) -> T | None:
        try:
            return await read
        except CorruptStore as exc:
            damaged.append(str(exc))
            return None

    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        total = await readable(runtime.thread_length(args.thread))
        runs = await readable(runtime.runs(thread_id=args.thread))
        if not total and not runs and not damaged:
            print(f"no thread {args.thread!r}", file=sys.stderr)
            return EXIT_FAILED
        count = "?" if total is None else str(total)
        print(f"thread {args.thread!r}: {count} entries, "
              f"{'?' if runs is None else len(runs)} runs\n")
        # Page by page: a thread of any length is shown in the same memory. Without its
        # length (unreadable), pages are read until a short one.
        offset = 0
        while total is None or offset < total:
            page = await readable(runtime.entries(args.thread, offset=offset, limit=SHOW_PAGE))
            if page is None:  # still show the runs: they say what happened
                print(f"(entries from {offset + 1} on are unreadable)")
                break
            for i, entry in enumerate(page, offset + 1):
                print(render_entry(i, entry))
            offset += SHOW_PAGE
            if total is None and len(page) < SHOW_PAGE:
                break
        print("\nruns:")
        if runs is None:
            print("(the runs are unreadable)")
        for run in runs or []:
            print(render_run(run))
            steps = await readable(runtime.transitions(run.id))
            if steps is None:
                print("    (its transitions are unreadable)")
            for t in steps or []:
                print(render_transition(t))
            for d in run.decisions:
                verb = "approved" if d.approve else "denied"
                print(f"    decision: {verb} call {d.tool_call_id} by {d.by}"
                      + (f" ({d.reason})" if d.reason else ""))
    if damaged:
        print(f"maiden: {damaged[0]}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


async def _runs(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from channels import render_run

    from .app import open_runtime

    states = [RunState(s) for s in args.state] if args.state else None
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        runs = await runtime.runs(thread_id=args.thread, states=states, limit=args.limit)
    if not runs:
        print("no runs")
    for run in runs:
        print(render_run(run))
    return EXIT_OK


async def _approve(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "decide", args.run, tool_call_id=args.call,
                          approve=not args.deny, by=args.by, reason=args.reason)


async def _resume(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "resume", args.run)


async def _cancel(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    return await _control(loaded, "cancel", args.run, by=args.by)


async def _control(loaded: LoadedConfig, kind: str, run_id: str, **payload: Any) -> int:
    """Decide, resume or cancel. The runtime hands the request to a serving process on the
    same store if one is alive (it may be holding the run); else it acts right here."""
    from .app import open_runtime

    async with open_runtime(loaded, recover=False) as runtime:
        if kind == "decide":
            run = await runtime.decide(run_id, payload["tool_call_id"],
                                       approve=payload["approve"], by=payload["by"],
                                       reason=payload["reason"])
        elif kind == "resume":
            run = await runtime.resume(run_id)
        else:
            run = await runtime.cancel(run_id, by=payload["by"])
            print(f"run {run.id} {run.state}: {run.reason}")
            return EXIT_OK if run.state is RunState.CANCELLED else EXIT_FAILED
        run = await runtime.wait(run.id)
        await runtime.idle()  # messages queued behind it on the thread go now too
        return _report(run)


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
    from .app import open_runtime

    since = _since(args.since)
    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        runs = [r for r in await runtime.runs() if r.created_at >= since]
    totals: dict[str, list[float]] = {}
    for run in runs:
        row = totals.setdefault(run.thread_id, [0, 0, 0, 0, 0.0])
        u = run.usage
        for i, value in enumerate((1, run.turns, u.input_tokens + u.cache_read_tokens
                                   + u.cache_creation_tokens, u.output_tokens, run.cost_usd)):
            row[i] += value
    print(f"{'thread':<40} {'runs':>6} {'turns':>6} {'input':>10} {'output':>10} {'cost $':>10}")
    for thread, (n, turns, inp, out, cost) in sorted(totals.items(), key=lambda kv: -kv[1][4]):
        print(f"{thread[:40]:<40} {n:>6.0f} {turns:>6.0f} {inp:>10.0f} {out:>10.0f} "
              f"{cost:>10.4f}")
    all_cost = sum(row[4] for row in totals.values())
    print(f"{'total':<40} {len(runs):>6} {'':>6} {'':>10} {'':>10} {all_cost:>10.4f}")
    return EXIT_OK


async def _migrate(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from .migrate import copy_store, open_spec

    cfg, base = loaded.config.store, loaded.base_dir
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
          f"{counts.notes:,} notes")
    return EXIT_OK


_COMMANDS: dict[str, Any] = {
    "migrate": _migrate,
    "run": _run, "chat": _chat, "send": _send, "threads": _threads, "show": _show,
    "runs": _runs, "approve": _approve, "resume": _resume, "cancel": _cancel,
    "usage": _usage, "schedules": _schedules,
}
