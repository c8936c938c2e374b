"""`maiden chat` and `maiden send`: talk to the agent from the terminal."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from channels.access import RIGHTS
from runtime import (
    FileRef,
    FileRefused,
    MaidenError,
    Origin,
    Run,
    RunError,
    RunState,
    Runtime,
)

from ..config import LoadedConfig
from .common import EXIT_INTERRUPTED, EXIT_OK, UsageError, report

__all__ = ["COMMANDS"]


async def _chat(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from channels import chat

    from ..app import open_runtime

    async with open_runtime(loaded, recover=False, serve=True, writable=True,
                            log_runs=args.verbose) as runtime:
        left = await chat(runtime, args.thread)
    return EXIT_INTERRUPTED if left == "interrupted" else EXIT_OK


async def _send(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """One message. Ctrl-C cancels the run (its tools stop) and says so; a second Ctrl-C
    leaves at once, the run left where it stands for the next start to carry on."""
    from channels.terminal import on_sigint

    from ..app import open_runtime

    given = _read_files(args.file)
    async with open_runtime(loaded, recover=False, serve=True, writable=True,
                            log_runs=args.verbose) as runtime:
        files = await _store_files(runtime, given)
        # The operator's command line: every right (a workspace memory among them).
        run = await runtime.submit(args.thread, args.text,
                                   origin=Origin(channel="cli", rights=RIGHTS), files=files)
        waiting = asyncio.ensure_future(runtime.wait(run.id))
        interrupts = 0

        def interrupted() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1 and waiting.done():
                return  # it ended before Ctrl-C came through: nothing to cancel (said below)
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
            except MaidenError as exc:
                # Taken, then the store failed: said, so that nobody sends it again (the
                # command has no key: the same words again would be a second message).
                print(f"maiden: run {run.id} was taken, then the store failed ({exc}); it "
                      f"goes on from where it stands with `maiden run` (or the next command "
                      f"on thread {args.thread!r}): do not send it again", file=sys.stderr)
                raise
        if interrupts < 2 and run.reply_files:
            await _save_files(loaded, runtime, run)
    if interrupts >= 2:
        # Leave now: a sync tool's thread cannot be stopped, and Python would wait for it
        # at exit. The store is closed; the run is where the next start carries it on.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    if interrupts and run.state is not RunState.CANCELLED:
        # The run got to its end before the cancellation could stop it: said, so that its
        # answer below is not taken for what was left of a cancelled run.
        print(f"maiden: run {run.id} {run.state} before the cancellation could stop it: "
              "it was not cancelled", file=sys.stderr)
    code = report(run)
    return EXIT_INTERRUPTED if interrupts and run.state is RunState.CANCELLED else code


async def _save_files(loaded: LoadedConfig, runtime: Runtime, run: Run) -> None:
    """The files a tool made for the reply, saved under ``data/files/{run}/`` beside the
    config; their paths on stderr."""
    folder = loaded.base_dir / "data" / "files" / run.id
    folder.mkdir(parents=True, exist_ok=True)
    for ref in run.reply_files:
        path = folder / (Path(ref.name).name or ref.digest)
        path.write_bytes((await runtime.kept.files.read(ref.digest))[1])
        print(f"maiden: saved {ref.describe()} to {path}", file=sys.stderr)


def _read_files(paths: list[str]) -> list[tuple[Path, bytes]]:
    """``--file`` paths and their bytes; ``UsageError`` naming one that cannot be read."""
    read = []
    for given in paths:
        path = Path(given).expanduser()
        try:
            read.append((path, path.read_bytes()))
        except OSError as exc:
            raise UsageError(f"--file {given}: {exc.strerror or exc}") from None
    return read


async def _store_files(runtime: Runtime, given: list[tuple[Path, bytes]]) -> list[FileRef]:
    """The ``--file`` files, stored; ``UsageError`` naming the ``[files]`` limit one breaks
    (as the HTTP API refuses the message, the command is refused: the person can fix it)."""
    try:
        runtime.kept.files.too_many(len(given))
    except FileRefused as exc:
        raise UsageError(f"--file given {len(given)} times: {exc.why}") from None
    stored = []
    for path, data in given:
        try:
            stored.append(await runtime.kept.files.put(path.name, None, data))
        except FileRefused as exc:
            raise UsageError(f"--file {path}: {exc.why}") from None
    return stored


async def _cancel_run(runtime: Any, run_id: str) -> None:
    try:
        await runtime.cancel(run_id, by="terminal")
    except RunError as exc:
        if exc.reason != "already_ended":  # `send` says how it ended itself
            print(f"maiden: {exc}", file=sys.stderr)
    except MaidenError as exc:
        print(f"maiden: {exc}", file=sys.stderr)


COMMANDS = {"chat": _chat, "send": _send}
