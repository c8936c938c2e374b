"""`maiden`: the command line. It parses the arguments, sets up logging, and calls the
command (``bot.commands``), turning its errors into one line and an exit status. Imports only
what the chosen command needs."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from channels import ChannelRefused
from runtime import (
    SCOPE_KINDS,
    ConfigError,
    InvalidThreadId,
    MaidenError,
    RunError,
    RunState,
    make_undumpable,
)

from .commands import COMMANDS, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, UsageError
from .config import LoadedConfig, load_config
from .logging import configure as configure_logging

__all__ = ["build_parser", "main"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


class _Version(argparse.Action):
    """``--version``: the installed maiden's version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from runtime import maiden_version

        print(f"maiden {maiden_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The command line: every command and its arguments (the docs' CLI reference is
    generated from it)."""
    p = argparse.ArgumentParser(prog="maiden", description="A durable, self-hosted AI agent.")
    p.add_argument("--config", default="agent.toml", metavar="PATH",
                   help="path to agent.toml (default: %(default)s)")
    p.add_argument("--version", action=_Version, help="print maiden's version and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    p.add_argument("--log-format", choices=["text", "json"], default="text",
                   help="log lines on stderr: readable text, or one JSON object per line "
                   "(default: %(default)s)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text)  # `COMMAND --help` too

    for add in (_talk, _threads, _runs, _service):
        add(command)
    return p


Command = Callable[[str, str], argparse.ArgumentParser]
"""Adds a command (name, what it does) and gives back its parser."""


def _talk(command: Command) -> None:
    """`run`, `chat`, `send`."""
    command("run", "recover unfinished runs, then serve everything configured: the HTTP "
            "API and console, Slack, Discord, schedules (until SIGINT/SIGTERM)")
    chat = command("chat", "talk to the agent in the terminal")
    chat.add_argument("--thread", default="terminal", metavar="ID",
                      help="thread id (default: %(default)s)")
    send = command("send", "send one message and print the reply")
    send.add_argument("thread", help="the thread id (any string without control characters)")
    send.add_argument("text", help="the message")
    send.add_argument("--file", action="append", default=[], metavar="PATH",
                      help="a file for the agent to read (repeatable; [files] limits apply)")

def _threads(command: Command) -> None:
    """`threads` (and `export`, `delete`), `show`."""
    threads = command("threads", "list threads, the most recently active first (or export "
                      "or delete one)")
    threads.add_argument("--limit", type=_positive, metavar="N",
                         help="show the N most recently active (default: all)")
    threads_sub = threads.add_subparsers(dest="threads_command",
                                         metavar="[export|delete THREAD]")
    exported = threads_sub.add_parser(
        "export", help="print everything kept of a thread as JSON lines: its entries, "
        "runs, votes, notes, memories and files (by digest)", description="print "
        "everything kept of a thread as JSON lines: its entries, runs, votes, notes, "
        "memories and files (by digest)")
    exported.add_argument("thread", help="the thread id")
    erase = threads_sub.add_parser(
        "delete", help="erase a thread and everything of it (a run in progress is "
        "cancelled first); deleting a thread that is not there is no error",
        description="erase a thread and everything of it: its entries, runs, outbox "
        "records, votes, notes, memories and the files no other thread names, in one write "
        "(a run in progress is cancelled first, wherever it runs); deleting a thread that "
        "is not there is no error")
    erase.add_argument("thread", help="the thread id")
    erase.add_argument("--by", default="cli", metavar="NAME",
                       help="who deletes, as the cancellation of a run in progress records "
                       "it (default: %(default)s)")
    show = command("show", "show a thread's entries and runs")
    show.add_argument("thread", help="the thread id")
    show.add_argument("--tail", type=_positive, metavar="N",
                      help="only the last N entries, and the runs they are from (default: "
                      "all)")

def _memory(command: Command) -> None:
    """`memory`, `memory list`, `memory forget ID`."""
    remembered = command("memory", "list what the agent remembers (the [tools] memory "
                         "built-in), newest first, or forget one")
    memory_sub = remembered.add_subparsers(dest="memory_command",
                                           metavar="[list|forget ID|forget --person ID]")
    listing = memory_sub.add_parser("list", help="the memories, newest first (the default)",
                                    description="the memories, newest first, expired ones "
                                    "left out: each with its id, scope, text and source")
    for parser in (remembered, listing):
        parser.add_argument("--query", metavar="Q", help="only those holding a word of Q")
        parser.add_argument("--scope", choices=list(SCOPE_KINDS),
                            help="only those of this scope")
        parser.add_argument("--thread", metavar="ID", help="only those learned in this "
                            "thread or kept for it")
        parser.add_argument("--limit", type=_positive, default=50, metavar="N",
                            help="show the newest N (default: %(default)s)")
    forget = memory_sub.add_parser("forget", help="forget a memory by its id, or a "
                                   "person's memories", description="forget a memory, "
                                   "whoever said it (the CLI has every right); or, with "
                                   "--person, every memory a person said or that is about "
                                   "them")
    which = forget.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="the memory's id (or its start, as long as "
                       "one id starts so)")
    which.add_argument("--person", metavar="ID", help="a person as memories name them "
                       "(slack:U0ANA, discord:1234, http:NAME): forget every memory they "
                       "said or that is about them, in one write")


def _runs(command: Command) -> None:
    """`runs`, `approve`, `resume`, `cancel`, `usage`."""
    runs = command("runs", "list runs")
    runs.add_argument("--state", choices=[s.value for s in RunState], action="append",
                      metavar="STATE", help="only runs in this state (repeatable)")
    runs.add_argument("--thread", metavar="ID", help="only the runs of this thread")
    runs.add_argument("--limit", type=_positive, default=50, metavar="N",
                      help="show the newest N runs (default: %(default)s)")
    approve = command("approve", "approve (or --deny) a call waiting for a person")
    approve.add_argument("run", help="the run's id")
    approve.add_argument("call", help="the tool call's id (as `maiden send` and `maiden runs` "
                         "print it)")
    approve.add_argument("--deny", action="store_true", help="deny the call instead")
    approve.add_argument("--by", default="cli", metavar="NAME",
                         help="who decides, as recorded (default: %(default)s)")
    approve.add_argument("--reason", default="", metavar="TEXT", help="why, as recorded")
    resume = command("resume", "run a failed, cancelled or timed-out run again")
    resume.add_argument("run", help="the run's id")
    cancel = command("cancel", "cancel a run (wherever it is running)")
    cancel.add_argument("run", help="the run's id")
    cancel.add_argument("--by", default="cli", metavar="NAME",
                        help="who cancels, as recorded (default: %(default)s)")
    usage = command("usage", "tokens and cost by thread, agent, person or place")
    usage.add_argument("--since", metavar="AGE_OR_DATE",
                       help="an ISO date/time, or an age such as 24h or 7d")
    usage.add_argument("--by", choices=["thread", "agent", "user", "place"],
                       help="what the rows are (default: thread)")

def _service(command: Command) -> None:
    """`schedules`, `files`, `knowledge`, `check`, `migrate`."""
    sched = command("schedules", "list the schedules: next fires, last slot")
    sched_sub = sched.add_subparsers(dest="schedules_command",
                                     metavar="[run|pause|resume|delete NAME]")
    for verb, text in (
            ("run", "run one schedule now and print its answer"),
            ("pause", "pause a schedule: its slots are not run until it is resumed"),
            ("resume", "resume a paused schedule: it fires from its next slot on (the slots "
             "missed while paused are not caught up)"),
            ("delete", "delete a schedule made from chat (one from agent.toml is removed "
             "there)")):
        sched_sub.add_parser(verb, help=text, description=text).add_argument(
            "name", help="the schedule's name")
    stored = command("files", "list the files the store holds (shared, or made by tools)")
    files_sub = stored.add_subparsers(dest="files_command", metavar="[prune]")
    prune = files_sub.add_parser("prune", help="remove files no message names, older than "
                                 "[files] retention_days")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    _memory(command)
    known = command("knowledge", "the [[knowledge]] folders: each one's files and passages "
                    "in the store (status, the default), or index them now")
    known_sub = known.add_subparsers(dest="knowledge_command", metavar="[status|index]")
    known_sub.add_parser("status", help="each source: its folder, files, passages, when last "
                         "indexed", description="each source: its folder (and whether it is "
                         "there), its files and passages in the store, when last indexed")
    known_sub.add_parser("index", help="index every source now (new and changed files "
                         "stored, vanished ones dropped), printing progress",
                         description="index every source now, in this process: new and "
                         "changed files are stored, vanished ones dropped, unchanged ones "
                         "left alone; progress and a summary are printed")
    command("check", "validate the config and say what is configured")
    migrate = command("migrate", "copy a store into another (e.g. SQLite into PostgreSQL) "
                      "and verify the counts")
    migrate.add_argument("--from", dest="source", required=True, metavar="STORE",
                         help="sqlite:PATH, files:PATH or postgres")
    migrate.add_argument("--to", dest="target", default="postgres", metavar="STORE",
                         help="the same forms; postgres: [store] dsn_env and schema "
                         "(default: %(default)s)")

def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status. Ctrl-C where the command does not handle it
    itself (while it starts, say) ends it with one line, never a traceback."""
    # First of all: from here on no process of our uid (a tool's command) can read this
    # one's environment or memory through /proc. See runtime.tools.isolation.
    make_undumpable()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("maiden: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.INFO if args.verbose or args.command == "run" else logging.ERROR
    configure_logging(args.log_format, level, verbose=args.verbose)
    try:
        loaded = load_config(args.config)
        args.log_context = configure_logging(args.log_format, level, verbose=args.verbose,
                                             secrets=_secret_values(loaded))
        if args.command == "check":
            from .check import check

            return check(loaded)
        if not loaded.exists and args.command not in _SAY_THEIR_CONFIG:
            print(_defaults_line(loaded), file=sys.stderr)
        if args.command != "migrate":
            _import_tools(loaded)
        code: int = asyncio.run(COMMANDS[args.command](loaded, args))
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


_SAY_THEIR_CONFIG = ("run", "check", "migrate")
"""Commands that say which config and store they use themselves (the banner, the check's
report; migrate's are named on its command line)."""


def _defaults_line(loaded: LoadedConfig) -> str:
    """Without an ``agent.toml`` every default applies, the store too: one line says so, and
    where that store is (made there if it is not yet)."""
    from runtime import describe_store

    store = describe_store(loaded.config.store, loaded.base_dir)
    return (f"maiden: no config at {loaded.path}: every default applies; store: {store} "
            "(--config PATH names another)")


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
