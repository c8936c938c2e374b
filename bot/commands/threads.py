"""`maiden threads export THREAD` and `maiden threads delete THREAD`: what is kept of a
thread, as JSON lines on stdout, and its erasure (cancelling a run of it in progress first,
wherever it runs). `maiden threads` alone lists the threads (``show``)."""

from __future__ import annotations

import argparse
import os
import sys

from runtime import Erased

from ..config import LoadedConfig
from . import show
from .common import EXIT_OK

__all__ = ["COMMANDS", "describe_erased"]


async def _threads(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    command = getattr(args, "threads_command", None)
    if command == "export":
        return await _export(loaded, args.thread)
    if command == "delete":
        return await _delete(loaded, args.thread, args.by)
    return await show.COMMANDS["threads"](loaded, args)


async def _export(loaded: LoadedConfig, thread_id: str) -> int:
    """The thread as JSON lines (``runtime.serving.export`` says what each holds); ``NotFound``
    (exit 1) if there is no such thread."""
    from ..app import open_runtime

    async with open_runtime(loaded, recover=False, mcp=False) as runtime:
        export = await runtime.records.export(thread_id, secrets=_secret_values(loaded))
        async for line in export.lines():
            sys.stdout.write(line)
    return EXIT_OK


async def _delete(loaded: LoadedConfig, thread_id: str, by: str) -> int:
    """Erase the thread; a thread that is not there is no error (said so, exit 0)."""
    from ..app import open_runtime

    async with open_runtime(loaded, recover=False, mcp=False, writable=True) as runtime:
        erased = await runtime.delete_thread(thread_id, by=by)
    if erased.existed:
        print(f"deleted thread {thread_id!r}: {describe_erased(erased)}")
    else:
        print(f"no thread {thread_id!r}: nothing to delete")
    return EXIT_OK


def describe_erased(erased: Erased) -> str:
    """``3 entries, 1 run, 2 outbox records, 0 votes, 1 note, 0 memories, 0 files``."""
    counts = [(erased.entries, "entry", "entries"), (erased.runs, "run", "runs"),
              (erased.deliveries, "outbox record", "outbox records"),
              (erased.votes, "vote", "votes"), (erased.notes, "note", "notes"),
              (erased.memories, "memory", "memories"), (erased.blobs, "file", "files")]
    return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in counts)


def _secret_values(loaded: LoadedConfig) -> list[str]:
    """The values of every secret variable the config names, kept out of an export as
    they are kept out of the logs (``[redacted]``)."""
    names = {*loaded.config.secret_envs().values(), "ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    return [value for name in names if (value := os.environ.get(name))]


COMMANDS = {"threads": _threads}
