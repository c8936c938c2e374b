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
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

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
    describe_store,
)

from .config import LoadedConfig, env_status, load_config
from .logging import configure as configure_logging
from .rights import rights_lines

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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
    sub.add_parser("run", help="recover unfinished runs, then serve the HTTP API until "
                   "SIGINT/SIGTERM")
    chat = sub.add_parser("chat", help="talk to the agent in the terminal")
    chat.add_argument("--thread", default="terminal", help="thread id (default: %(default)s)")
    send = sub.add_parser("send", help="send one message and print the reply")
    send.add_argument("thread")
    send.add_argument("text")
    sub.add_parser("threads", help="list threads")
    show = sub.add_parser("show", help="show a thread's entries and runs")
    show.add_argument("thread")
    runs = sub.add_parser("runs", help="list runs")
    runs.add_argument("--state", choices=[s.value for s in RunState], action="append")
    runs.add_argument("--thread")
    runs.add_argument("--limit", type=_positive, default=50,
                      help="show the newest N runs (default: %(default)s)")
    approve = sub.add_parser("approve", help="approve (or --deny) a call waiting for a person")
    approve.add_argument("run")
    approve.add_argument("call")
    approve.add_argument("--deny", action="store_true")
    approve.add_argument("--by", default="cli")
    approve.add_argument("--reason", default="")
    resume = sub.add_parser("resume", help="run a failed, cancelled or timed-out run again")
    resume.add_argument("run")
    cancel = sub.add_parser("cancel", help="cancel a run (wherever it is running)")
    cancel.add_argument("run")
    cancel.add_argument("--by", default="cli")
    usage = sub.add_parser("usage", help="tokens and cost by thread")
    usage.add_argument("--since", help="an ISO date/time, or an age such as 24h or 7d")
    sched = sub.add_parser("schedules", help="list the schedules: next fires, last slot")
    sched_sub = sched.add_subparsers(dest="schedules_command", metavar="[run NAME]")
    run_one = sched_sub.add_parser("run", help="run one schedule now and print its answer")
    run_one.add_argument("name")
    sub.add_parser("check", help="validate the config and say what is configured")
    migrate = sub.add_parser("migrate", help="copy a store into another (e.g. SQLite into "
                             "PostgreSQL) and verify the counts")
    migrate.add_argument("--from", dest="source", required=True, metavar="STORE",
                         help="sqlite:PATH, files:PATH or postgres")
    migrate.add_argument("--to", dest="target", default="postgres", metavar="STORE",
                         help="the same forms; postgres: [store] dsn_env and schema "
                         "(default: %(default)s)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.INFO if args.verbose or args.command == "run" else logging.ERROR
    configure_logging(args.log_format, level)
    try:
        loaded = load_config(args.config)
        args.log_context = configure_logging(args.log_format, level,
                                             secrets=_secret_values(loaded))
        if args.command == "check":
            return _check(loaded)
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
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`maiden show t | head`): not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _check(loaded: LoadedConfig) -> int:
    from runtime import make_provider, make_tools

    cfg = loaded.config
    tools = make_tools(cfg.tools, loaded.base_dir)
    make_provider(cfg.provider, loaded.base_dir)
    print(f"{loaded.path}: {'ok' if loaded.exists else 'not found, using defaults'}")
    print(f"  agent     {cfg.agent.name!r}, max_turns={cfg.agent.max_turns}, "
          f"max_tool_calls_per_turn={cfg.agent.max_tool_calls_per_turn}, "
          f"repeat_limit={cfg.agent.repeat_limit}")
    print(f"  provider  {cfg.provider.kind}" + (f", model {cfg.provider.model}"
                                               if cfg.provider.model else ""))
    print(f"  store     {describe_store(cfg.store, loaded.base_dir)}")
    store_failed = _check_store(loaded)
    print(f"  runtime   concurrency={cfg.runtime.concurrency}")
    print(f"  tools     {', '.join(f'{t.name} ({t.effect})' for t in tools) or 'none'}")
    asks = [t.name for t in tools if t.requires_approval]
    if asks:
        who = ", ".join(cfg.agent.approvers) or "anyone who can reach maiden"
        print(f"  approval  {', '.join(asks)} (decided by {who})")
    limits = {k: v for k, v in cfg.budget.model_dump().items()
              if k.startswith("max_") and v is not None}
    print("  budget    " + (", ".join(f"{k}={v:g}" for k, v in limits.items()) or "no limits"))
    http = cfg.http
    if not http.enabled:
        print("  http      disabled")
    else:
        print(f"  http      {http.host}:{http.port}" + (f", token from ${http.token_env}"
                                                         if http.token_env else ", no token"))
    failed = store_failed | _check_slack(loaded) | _check_discord(loaded)
    for line in rights_lines(cfg, 9):
        print(line)
    failed |= _check_mcp(loaded)
    defined = cfg.read_schedules()
    chat = cfg.schedules_limits.max_per_thread
    print(f"  schedules {len(defined)} in the config"
          + "".join(f"; {s.name} {s.config.cron!r} {s.cron.timezone}" for s in defined[:5])
          + ("; ..." if len(defined) > 5 else "")
          + (f"; from chat: up to {chat} per conversation (schedule_* tools)" if chat
             else "; none from chat ([schedules_limits] max_per_thread = 0)"))
    missing = [var for var, ok in env_status(cfg).items() if not ok]
    for var, ok in env_status(cfg).items():
        print(f"  secret    ${var}: {'set' if ok else 'NOT SET'}")
    return EXIT_FAILED if missing or failed else EXIT_OK


def _check_store(loaded: LoadedConfig) -> bool:
    """For PostgreSQL: connect, migrate if needed, print the server's and the schema's
    versions; True if it cannot be reached."""
    cfg = loaded.config.store
    if cfg.kind != "postgres":
        return False
    from runtime import make_store

    async def versions() -> tuple[str, int]:
        from runtime.stores.postgres import PostgresStore

        store = make_store(cfg, loaded.base_dir)
        assert isinstance(store, PostgresStore)
        async with store:
            return await store.versions()

    try:
        server, schema = asyncio.run(versions())
    except ConfigError as exc:
        print(f"            {exc.problems[0][1]}")
        return True
    except MaidenError as exc:
        print(f"            FAILED to connect: {exc}")
        return True
    print(f"            {server}; maiden schema version {schema}")
    return False


def _check_mcp(loaded: LoadedConfig) -> bool:
    """Start each MCP server, list its tools with their effect classes, stop it; True if
    one failed to start."""
    servers = loaded.config.mcp_servers
    if not servers:
        print("  mcp       not configured")
        return False
    from runtime.mcp import check_servers  # the MCP SDK loads only here

    failed = False
    for report in asyncio.run(check_servers(servers, loaded.base_dir)):
        where = f"{report.config.name} ({report.config.describe()})"
        if report.problem is not None:
            failed = True
            print(f"  mcp       {where}: FAILED to start: {report.problem}")
            continue
        count = len(report.tools)
        print(f"  mcp       {where}: {count} tool{'' if count == 1 else 's'}")
        for t in report.tools:
            print(f"            {t.name} ({t.effect}"
                  + (", asks approval)" if t.requires_approval else ")"))
        for note in report.notes:
            print(f"            note: {note}")
    return failed


def _check_discord(loaded: LoadedConfig) -> bool:
    """Print what Discord is configured to do and whether its token works; True if not."""
    discord = loaded.config.channels.discord
    if discord is None or not discord.enabled:
        return _verify("discord", None, None)
    from channels.discord.check import check_discord

    about = (f"api {discord.api_url}, respond_in {discord.respond_in}, "
             f"{discord.access.summary()}")
    return _verify("discord", about, lambda: check_discord(discord, discord.token()))


def _check_slack(loaded: LoadedConfig) -> bool:
    """Print what Slack is configured to do and whether its token works; True if not."""
    slack = loaded.config.channels.slack
    if slack is None or not slack.enabled:
        return _verify("slack", None, None)
    from channels.slack.check import check_slack

    about = f"mode {slack.mode}, api {slack.api_url}, {slack.access.summary()}"
    # The bot token alone: auth.test needs nothing else, and a mode's other secret, if
    # unset, is listed with the secrets (and fails the check) anyway.
    return _verify("slack", about, lambda: check_slack(slack, slack.bot_token()))


def _verify(
    name: str, about: str | None,
    check: Callable[[], Coroutine[Any, Any, tuple[bool, list[str]]]] | None,
) -> bool:
    """One channel's lines in `maiden check`; True if it will not work as configured."""
    if about is None or check is None:
        print(f"  {name:<9} not configured")
        return False
    print(f"  {name:<9} {about}")
    try:
        ok, lines = asyncio.run(check())
    except ConfigError:
        return True  # its unset variables are listed with the secrets
    for line in lines:
        print(f"            {line}")
    return not ok


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


def _secret_values(loaded: LoadedConfig) -> list[str]:
    """The values of every secret variable the config names (kept out of the logs)."""
    names = {*loaded.config.secret_envs().values(), "ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    return [value for name in names if (value := os.environ.get(name))]


async def _run(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from .app import serve

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
    from channels import render_entry, render_run, render_transition

    from .app import open_runtime

    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        total = await runtime.thread_length(args.thread)
        runs = await runtime.runs(thread_id=args.thread)
        if not total and not runs:
            print(f"no thread {args.thread!r}", file=sys.stderr)
            return EXIT_FAILED
        print(f"thread {args.thread!r}: {total} entries, {len(runs)} runs\n")
        # Page by page: a thread of any length is shown in the same memory.
        for offset in range(0, total, SHOW_PAGE):
            try:
                page = await runtime.entries(args.thread, offset=offset, limit=SHOW_PAGE)
            except CorruptStore as exc:  # still show the runs: they say what happened
                print(f"(entries from {offset + 1} on are unreadable)")
                print(f"maiden: {exc}", file=sys.stderr)
                break
            for i, entry in enumerate(page, offset + 1):
                print(render_entry(i, entry))
        print("\nruns:")
        for run in runs:
            print(render_run(run))
            for t in await runtime.transitions(run.id):
                print(render_transition(t))
            for d in run.decisions:
                verb = "approved" if d.approve else "denied"
                print(f"    decision: {verb} call {d.tool_call_id} by {d.by}"
                      + (f" ({d.reason})" if d.reason else ""))
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
