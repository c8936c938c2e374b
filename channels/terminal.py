"""The terminal channel: `maiden chat`, and the readable rendering `maiden show` uses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from runtime import (
    ApprovalRequested,
    AssistantTurn,
    Entry,
    Notice,
    Origin,
    Run,
    RunEnded,
    RunState,
    Runtime,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolResult,
    Transition,
    UserMessage,
)

from .access import RIGHTS

__all__ = ["LineReader", "chat", "on_sigint", "render_entry", "render_run",
           "render_transition"]

ReadLine = Callable[[str], Awaitable[str | None]]


def _json(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _block(text: str) -> str:
    """A text of any number of lines, indented as one block under its entry's head."""
    return textwrap.indent(text, "    ")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def render_entry(index: int, entry: Entry) -> str:
    """One entry as the reader sees it in `maiden show`."""
    head = f"[{index}] {_when(entry.at)}"
    if isinstance(entry, UserMessage):
        who = f" {entry.user}" if entry.user else ""
        files = "".join(f"\n    [file {f.describe()} sha256:{f.digest}]" for f in entry.files)
        return f"{head} user{who} (run {entry.run_id}):\n{_block(entry.text)}{files}"
    if isinstance(entry, AssistantTurn):
        lines = [f"{head} assistant:"]
        if entry.text:
            lines.append(_block(entry.text))
        for call in entry.tool_calls:
            lines.append(f"    -> calls {call.name} {_json(call.arguments)}  [{call.id}]")
        return "\n".join(lines)
    if isinstance(entry, ToolResult):
        status = "error" if entry.is_error else "result"
        return f"{head} tool {entry.name} {status} [{entry.tool_call_id}]:\n" \
               f"{_block(_json(entry.content))}"
    assert isinstance(entry, Notice)
    if entry.code == "summary" and entry.covers is not None:
        return f"{head} summary of entries 1-{entry.covers} (sent in their place):\n" \
               f"{_block(entry.text)}"
    return f"{head} notice ({entry.code}):\n{_block(entry.text)}"


def render_run(run: Run, steps: Sequence[Transition] = ()) -> str:
    """One line per run, as in `maiden runs`; with its transitions (``steps``), each
    recovery after a crash also says what the run was doing when its process died."""
    usage = run.usage
    agent = f"agent={run.agent}  " if run.agent else ""  # with several agents
    line = (f"{run.id}  {run.state:<17} {run.reason:<40.40}  thread={run.thread_id!r}  "
            f"{agent}turns={run.turns} tools={run.tool_calls} "
            f"tokens={usage.input_tokens}/{usage.output_tokens} cost=${run.cost_usd:.4f}  "
            f"{_when(run.created_at)}")
    if run.recovery_attempts:
        line += f"\n    recovered after crash x{run.recovery_attempts}"
        for t in steps:
            if t.reason.startswith("recovered after crash"):
                line += f"\n      {_when(t.at)}  {t.reason}: its process died with the " \
                        f"run {t.source}"
    if run.pending_approval is not None:
        p = run.pending_approval
        line += f"\n    waiting for approval of {p.name} {_json(p.arguments)} " \
                f"(call {p.tool_call_id}, {p.reason})"
    if run.error:
        line += f"\n    error: {run.error}"
    return line


def render_transition(t: Transition) -> str:
    return f"    {_when(t.at)}  {t.source} -> {t.target}: {t.reason}"


class LineReader:
    """Lines typed at the terminal, read on the event loop (no thread).

    A thread blocked in ``input()`` cannot be stopped: after Ctrl-C it would still be
    waiting, and swallow the next line typed. Reading the file descriptor when the
    loop says it is ready lets Ctrl-C end the wait at once. Standard input that the
    loop cannot watch (a regular file) is read directly.
    """

    def __init__(self, fd: int | None = None, out: TextIO = sys.stdout) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self.out = out
        self._buffer = b""
        self._eof = False

    async def __call__(self, prompt: str) -> str | None:
        """The next line (without its newline), None at end of input; ``KeyboardInterrupt``
        on Ctrl-C."""
        self.out.write(prompt)
        self.out.flush()
        while b"\n" not in self._buffer and not self._eof:
            await self._readable()
            chunk = os.read(self.fd, 65536)
            self._buffer += chunk
            self._eof = not chunk
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    async def _readable(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def settle(exc: BaseException | None = None) -> None:
            if not ready.done():
                if exc is None:
                    ready.set_result(None)
                else:
                    ready.set_exception(exc)

        try:
            loop.add_reader(self.fd, settle)
        except (OSError, NotImplementedError):
            return  # a regular file: always readable
        try:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGINT, settle, KeyboardInterrupt())
            await ready
        finally:
            loop.remove_reader(self.fd)
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)


async def chat(
    runtime: Runtime,
    thread_id: str,
    *,
    read_line: ReadLine | None = None,
    out: TextIO = sys.stdout,
) -> Literal["done", "interrupted"]:
    """An interactive conversation on one thread, showing tool calls as they happen.

    A run that pauses for approval is followed on once it is decided, wherever that is
    done (`maiden approve` in another terminal included). Ctrl-C while the agent works or
    waits cancels that run (the thread stays usable); Ctrl-C at the prompt leaves at once
    ("interrupted"); Ctrl-D or /quit leaves ("done").
    """
    read = read_line or LineReader(out=out)
    out.write(f"maiden chat on thread {thread_id!r}. Ctrl-C cancels a reply; at the prompt "
              "it leaves, as do Ctrl-D and /quit. /help lists chat's commands.\n")
    while True:
        try:
            line = await read("you> ")
        except KeyboardInterrupt:
            out.write("\n")
            return "interrupted"
        if line is None or line.strip() in ("/quit", "/exit"):
            out.write("\n")
            return "done"
        if not line.strip():
            continue
        if line.strip() == "/help":
            out.write(_chat_help(thread_id))
            continue
        # The terminal is the operator's: every right (a workspace memory among them).
        run = await runtime.submit(thread_id, line,
                                   origin=Origin(channel="cli", rights=RIGHTS))
        with _cancel_on_interrupt(runtime, run.id):
            await _follow_to_the_end(runtime, run.id, out,
                                     accepted=run.state is RunState.QUEUED)


_CHAT_COMMANDS = {
    "/help": "this list",
    "/quit, /exit": "leave (Ctrl-D too; Ctrl-C at the prompt)",
}
"""What `maiden chat` answers itself; any other line is a message to the agent."""


def _chat_help(thread_id: str) -> str:
    """``/help``: chat's own commands, and what becomes of every other line."""
    width = max(map(len, _CHAT_COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in _CHAT_COMMANDS.items()]
    return ("chat's commands:\n" + "\n".join(lines) + "\n"
            f"Any other line is a message to the agent on thread {thread_id!r}. Ctrl-C while "
            "it answers cancels that run; a call that waits for approval is decided with the "
            "`maiden approve` command it shows, from another terminal.\n")


@contextlib.contextmanager
def on_sigint(handler: Callable[[], None]) -> Iterator[None]:
    """Call ``handler`` on Ctrl-C (SIGINT) instead of raising, for the duration."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


@contextlib.contextmanager
def _cancel_on_interrupt(runtime: Runtime, run_id: str) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[Any]] = set()

    def interrupt() -> None:
        task = loop.create_task(runtime.cancel(run_id, by="terminal"))
        pending.add(task)
        task.add_done_callback(pending.discard)

    with on_sigint(interrupt):
        yield


WAITING = (RunState.AWAITING_APPROVAL, RunState.QUEUED)
"""States a run pauses in until something happens elsewhere: a person's decision (from
`maiden approve`, the HTTP API or a chat button, in any process on the store), or the end
of the run it is queued behind."""


async def _follow_to_the_end(runtime: Runtime, run_id: str, out: TextIO, *,
                             accepted: bool = False) -> None:
    """Show the run until it ends, through its pauses: after an approval prompt, wait for
    the decision wherever it is made, then show the rest (Ctrl-C cancels the run).
    ``accepted``: just submitted (``Runtime.follow``)."""
    shown: set[str] = set()  # a call shown as it was asked for is not shown again
    while True:
        ended = await _follow(runtime, run_id, out, shown, accepted=accepted)
        accepted = False
        if ended is None or ended.state not in WAITING:
            return
        out.write("  [waiting for that; Ctrl-C cancels the run]\n")
        out.flush()
        await _moved(runtime, run_id, ended.state)


async def _moved(runtime: Runtime, run_id: str, state: RunState) -> None:
    """Until the run is no longer in ``state``: its first event says so when this process
    carries it on (``follow`` then shows it from there); the store, read every
    ``poll_interval_s``, when another process does."""
    async with runtime.subscribe(run_id) as events:
        while (await runtime.records.get_run(run_id)).state is state:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(runtime.operator.settings.poll_interval_s):
                    await events.next()
                    return


async def _follow(runtime: Runtime, run_id: str, out: TextIO, shown: set[str], *,
                  accepted: bool = False) -> RunEnded | None:
    """Show the run's events until it ends or pauses; the ``RunEnded`` that said so. A
    call in ``shown`` (shown before a pause for its approval) is not shown again when it
    starts once approved: only its result is."""
    streaming = False
    ended: RunEnded | None = None
    async for event in runtime.follow(run_id, accepted=accepted):
        if isinstance(event, TextDelta):
            if not streaming:
                out.write("bot> ")
                streaming = True
            out.write(event.text)
        elif isinstance(event, ToolCallStarted):
            if event.call.id not in shown:
                shown.add(event.call.id)
                out.write(f"  [tool] {event.call.name} {_json(event.call.arguments)}\n")
        elif isinstance(event, ToolCallFinished):
            mark = "error" if event.is_error else "ok"
            out.write(f"  [tool] {event.name} {mark}: {_json(event.content)}\n")
        elif isinstance(event, ApprovalRequested):
            out.write(f"  [approval needed] {event.name} {_json(event.arguments)}: run "
                      f"`maiden approve {event.run_id} {event.tool_call_id}` "
                      f"(or --deny)\n")
        elif isinstance(event, StateChanged) and streaming and event.state != "completed":
            out.write("\n")
            streaming = False
        elif isinstance(event, RunEnded):
            ended = event
            if streaming:
                out.write("\n")
            elif event.reply is not None:
                out.write(f"bot> {event.reply}\n")
            if event.kind != "run.completed":
                detail = f" - {event.error}" if event.error else ""
                out.write(f"  [{event.state}: {event.reason}{detail}]\n")
        out.flush()
    return ended
