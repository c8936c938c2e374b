"""The application: config -> store -> runtime -> channels, schedules.

`maiden run` composes everything in one lifespan. Startup: open the store, start the
MCP servers (their tools registered before any run is driven), recover every
unfinished run, start intake (the channels), then the schedules (catching up the slots
missed while down). Shutdown on SIGTERM or SIGINT: stop the schedules' alarms and
intake, let in-flight runs reach a checkpoint (``[runtime] shutdown_grace_s``), close
the channels, the runtime, the MCP servers and the store; exit 0.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from channels import Channel
from runtime import (
    ACTIVE_STATES,
    DRIVABLE_STATES,
    ConfigError,
    Indexer,
    KnowledgeSearch,
    MaidenError,
    Records,
    Runtime,
    StoreError,
    ToolRegistry,
    keep_indexed,
    make_tools,
    make_tracing,
)
from schedules import ScheduleBook, Scheduler, statuses

from .agents import make_agents
from .banner import banner_head, banner_tail
from .config import LoadedConfig
from .jobs import chat_schedule_tools, make_book, schedule_lines
from .logging import RunContext
from .logging import log_runs as log_run_events
from .opening import open_store, patiently, starting_again
from .recovering import Recovering
from .stalls import said_if_slow
from .wiring import ChannelFactory, Prepared, make_channels

if TYPE_CHECKING:
    from runtime.tools.mcp.group import McpServers

__all__ = ["YOUNG_OBJECTS", "App", "open_app", "open_channels", "open_runtime", "serve",
           "settle_heap"]

log = logging.getLogger("maiden.app")


@dataclass(frozen=True, slots=True)
class App:
    """An opened runtime and the book of its schedules."""

    runtime: Runtime
    book: ScheduleBook
    mcp: McpServers | None = None
    """The MCP servers it started (None: none configured, or not asked for)."""
    channels: tuple[Prepared, ...] = ()
    """The channels it was built for, each to be made over it (``Prepared.make``)."""
    indexer: Indexer | None = None
    """The ``[[knowledge]]`` folders' indexer, over its store."""


@asynccontextmanager
async def open_runtime(
    loaded: LoadedConfig, *, recover: bool, serve: bool = False, log_runs: bool = False,
    writable: bool = False, mcp: bool = True,
) -> AsyncIterator[Runtime]:
    """``open_app``'s runtime."""
    async with open_app(loaded, recover=recover, serve=serve, log_runs=log_runs,
                        writable=writable, mcp=mcp) as app:
        yield app.runtime


@asynccontextmanager
async def open_app(
    loaded: LoadedConfig, *, recover: bool, serve: bool = False, log_runs: bool = False,
    writable: bool = False, mcp: bool = True, wait_for_store: bool = False,
    hooks: bool = False, channels: Sequence[ChannelFactory] = (),
) -> AsyncIterator[App]:
    """Open the store and a runtime over it; with ``recover``, finish unfinished runs first;
    with ``serve``, answer other processes' requests (approve, cancel) for its runs; with
    ``log_runs``, log what each run does (`-v`).

    With ``mcp`` (a process that may drive runs), the ``[[mcp_servers]]`` are started
    before any run is driven and their tools registered; a server that fails to start
    does not stop the app: it is retried in the background (``App.mcp`` says how each
    is). They stop after the runtime has closed. With ``hooks`` (the process that takes
    webhooks), the ``[[hooks]]``' secrets are read from the environment. ``channels``: the
    channels it serves (``make_channels``): the runtime is built with their deliverers and
    fetchers, made first; the channels themselves are made over it later (``App.channels``).

    A store that cannot be opened (its folder cannot be made, the path is a folder, the
    file is not a database), or with ``writable`` cannot be written (a read-only file
    or folder), is a configuration problem: ``ConfigError`` on ``store.path``; with
    ``wait_for_store`` (`maiden run`), a PostgreSQL server out of reach is waited for
    (``bot.opening``).
    """
    cfg = loaded.config
    tools = make_tools(cfg.tools, loaded.base_dir)
    for made in chat_schedule_tools(loaded):
        tools.add(made)
    async with AsyncExitStack() as stack:
        agents = make_agents(cfg, loaded.base_dir, tools, stack)
        store = await open_store(loaded, wait=wait_for_store)
        stack.push_async_callback(store.close)
        servers = await _mcp_servers(loaded, tools, stack) if mcp else None
        book = make_book(loaded, store, hooks=hooks)
        tracing = make_tracing(cfg.otel)
        stack.callback(tracing.close)  # what is buffered goes out at the end
        records = Records(store)  # what a Slack reply's session is read from
        prepared = tuple(prepare(records) for prepare in channels)
        runtime = Runtime(store, agents=agents, caps=cfg.budgets, settings=cfg.runtime,
                          channels=cfg.chat_channels(),
                          deliverers={p.name: p.deliverer for p in prepared
                                      if p.deliverer is not None},
                          fetchers={p.name: p.fetcher for p in prepared
                                    if p.fetcher is not None},
                          services={"schedules": book,
                                    "knowledge": KnowledgeSearch(store, cfg.knowledge)},
                          files=cfg.files, tracing=tracing)
        stack.push_async_callback(runtime.close)
        if writable:
            await _check_writable(runtime, loaded, wait=wait_for_store)
        if log_runs:
            logger = asyncio.create_task(log_run_events(runtime), name="maiden-log-runs")
            stack.push_async_callback(_stopped, logger)
        if recover or serve:
            await runtime.start(recover=recover, serve=serve)
        yield App(runtime, book, servers, prepared,
                  Indexer(store, cfg.knowledge, loaded.base_dir))


async def _mcp_servers(loaded: LoadedConfig, tools: ToolRegistry, stack: AsyncExitStack
                       ) -> McpServers | None:
    """The ``[[mcp_servers]]`` started (stopped with ``stack``), their tools in ``tools``."""
    if not loaded.config.mcp_servers:
        return None
    from runtime.tools.mcp import open_servers  # the MCP SDK loads only here

    servers = await stack.enter_async_context(
        open_servers(loaded.config.mcp_servers, loaded.base_dir))
    servers.offer_to(tools)
    return servers


async def _check_writable(runtime: Runtime, loaded: LoadedConfig, *, wait: bool) -> None:
    """``ConfigError`` on ``store.path`` if the store does not take writes (``wait``: a
    PostgreSQL server out of reach is waited for, as at opening)."""
    store = loaded.config.store
    try:
        await patiently(runtime.operator.check_writable, what="the check that the store "
                        "takes writes", wait_s=store.open_wait_s if wait else 0.0)
    except StoreError as exc:
        where = loaded.base_dir / store.path
        raise ConfigError([("store.path", f"the {store.kind} store at {where} cannot be "
                            f"written: {exc}")], str(loaded.path)) from None


def _start_indexing(loaded: LoadedConfig, app: App) -> asyncio.Task[None]:
    """The ``[[knowledge]]`` folders' indexing passes, in the background from now on
    (``keep_indexed``: one now, then every ``[knowledge_index] every_minutes``)."""
    assert app.indexer is not None
    every_s = loaded.config.knowledge_index.every_minutes * 60
    return asyncio.create_task(keep_indexed(app.indexer, app.runtime.operator, every_s),
                               name="maiden-knowledge-index")


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def serve(
    loaded: LoadedConfig, out: TextIO = sys.stdout, *, context: RunContext | None = None
) -> None:
    """`maiden run`: recover, start every channel, serve until SIGINT or SIGTERM.

    One lifespan: the store, the runtime and each channel are entered on one exit
    stack and left in reverse order. The banner's first lines are printed at once,
    then recovery's progress, then the channels' lines and "Ready". Shutdown first
    stops intake on every channel, then lets runs reach a checkpoint
    (``runtime.close()``), then closes the channels (answering whoever still waits),
    the runtime and the store.
    """
    factories = make_channels(loaded)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    slow = asyncio.create_task(said_if_slow(stop), name="maiden-stop-watch")
    try:
        await starting_again(lambda ready: _serve_once(loaded, factories, stop, out, context,
                                                        ready),
                             stop, wait_s=loaded.config.store.open_wait_s)
    finally:
        await _stopped(slow)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    log.info("stopped")


async def _serve_once(
    loaded: LoadedConfig, factories: Sequence[ChannelFactory], stop: asyncio.Event,
    out: TextIO, context: RunContext | None, ready: asyncio.Event,
) -> None:
    """``serve``'s one lifespan (``ready`` set once it has said "Ready")."""
    async with open_app(loaded, recover=False, writable=True, wait_for_store=True,
                        hooks=True, channels=factories) as app:
        runtime = app.runtime
        _say(out, banner_head(loaded, runtime))
        wait_s = loaded.config.store.open_wait_s
        unfinished = await patiently(lambda: runtime.records.runs(states=DRIVABLE_STATES),
                                     wait_s=wait_s, what="reading the unfinished runs")
        if context is not None:  # recovery logs before the runs' first events
            for run in await patiently(
                    lambda: runtime.records.runs(states=ACTIVE_STATES), wait_s=wait_s,
                    what="reading the active runs"):
                context.remember(run.id, run.thread_id)
        logger = asyncio.create_task(log_run_events(runtime, context),
                                     name="maiden-log-runs")
        try:
            recovering = Recovering(runtime, unfinished, out, wait_s=wait_s)
            try:
                if await recovering.first(stop, loaded.config.runtime.recovery_before_ready_s):
                    # Made before the channels (the API lists and runs its schedules),
                    # started after them (the catch-up's answers need somewhere to go).
                    scheduler = Scheduler(app.book, runtime,
                                          channels=loaded.config.chat_channels())
                    channels = [made.make(runtime, scheduler, app.indexer)
                                for made in app.channels]
                    await _serve(loaded, app, scheduler, channels, recovering, stop, out, ready)
                else:
                    log.info("stopping during recovery")
            finally:
                await runtime.close()
                await recovering.end()
        finally:
            logger.cancel()
            await asyncio.gather(logger, return_exceptions=True)


async def open_channels(
    stack: AsyncExitStack, runtime: Runtime, channels: Sequence[Channel]
) -> None:
    """Enter each channel on ``stack``, in order, over a runtime built with their
    deliverers: a reply due while it (or a channel after it) still opens goes out at once,
    in order, not at the outbox's next sweep (one whose deliverer is not connected yet
    fails fast and waits in the outbox). Once it is up (its deliverer says so), what waited
    in the outbox for it (the replies of the runs recovery finished before any channel was
    open) goes out at once, in order, ahead of the replies to what comes in through it
    now; a channel still connecting in the background sends it itself when it connects."""
    for channel in channels:
        await stack.enter_async_context(channel)
        if channel.deliverer is not None and not getattr(channel.deliverer, "offline", None):
            runtime.spawn(_waited(runtime, channel.name), name=f"maiden-outbox:{channel.name}")


async def _waited(runtime: Runtime, channel: str) -> None:
    """Send what waited in the outbox for ``channel``, just up."""
    try:
        await runtime.operator.flush_deliveries(channel)
    except MaidenError as exc:  # the store: the outbox's next sweep tries again
        log.warning("sending what waited in the outbox for %s failed: %s", channel, exc)


YOUNG_OBJECTS = 10_000
"""Objects made (less those freed) between two collections of the youngest generation:
Python's 700 suits a script; a server with many runs going at once collects their objects
while they are still in use, and each collection that finds them alive moves them to an
older generation, whose collections walk them again."""


def settle_heap() -> None:
    """Once ready: what start-up made (modules, schemas, the config, the channels) lives as
    long as the process, so it is taken out of the cycle collector's way (``gc.freeze``,
    after a collection, so no garbage is kept). A full collection then walks only what
    serving makes: on the development VM, 10-20 ms instead of 60-80 ms, a pause that every
    ack and reply in flight waited for (bench workload 6). The price: an object made by
    then that later falls into a garbage cycle (a reconnected client's old one) is not
    freed; at most once each, so bounded by what start-up made.

    And the youngest generation is collected every ``YOUNG_OBJECTS``: with 50 threads at
    once (bench workload 4) the collector's time halves (for 500 messages, 30 collections
    of ~3 ms, 5 at most, against 1,050 of the youngest and 90 of the middle one, up to 4
    ms). ``python -m bench --only collector`` measures it against Python's defaults: the
    collector's time about 13 times less and its longest pause 9 ms instead of 78 ms; the
    messages a second the same within the noise."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()


async def _serve(
    loaded: LoadedConfig, app: App, scheduler: Scheduler, channels: list[Channel],
    recovering: Recovering, stop: asyncio.Event, out: TextIO, ready: asyncio.Event,
) -> None:
    runtime = app.runtime
    async with AsyncExitStack() as stack:
        await open_channels(stack, runtime, channels)
        # After the channels, so the catch-up's answers have somewhere to go.
        wait_s = loaded.config.store.open_wait_s
        await patiently(scheduler.start, wait_s=wait_s, what="the schedules' start")
        stack.push_async_callback(scheduler.close)
        lines = schedule_lines(await patiently(lambda: statuses(app.book), wait_s=wait_s,
                                               what="reading the schedules"))
        mcp = app.mcp.status_lines() if app.mcp is not None else ()
        _say(out, banner_tail(loaded, recovering.recovered, channels, lines, mcp,
                              recovering.left,
                              going_on=None if recovering.done else recovering.going_on()))
        ready.set()
        settle_heap()
        indexing = _start_indexing(loaded, app)
        stack.push_async_callback(_stopped, indexing)
        watched: dict[asyncio.Task[Any], str] = {asyncio.create_task(stop.wait()): "stop"}
        for channel in channels:
            watched[asyncio.create_task(channel.closed())] = channel.name
        done, pending = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        failed = [watched[t] for t in done if watched[t] != "stop"]
        for task in done:
            if watched[task] != "stop" and not task.cancelled() and task.exception():
                # What ended it, for the operator (chaos finding 26 had only the line below).
                log.error("the %s channel stopped: %r", watched[task], task.exception(),
                          exc_info=task.exception())
        out.write("maiden: stopping\n")
        out.flush()
        log.info("stopping: no new messages; letting runs reach a checkpoint")
        await scheduler.close()
        for channel in channels:
            channel.stop_intake()
        await _stopped(indexing)  # a file being stored is stored whole, or not at all
        await runtime.close()
        if failed:
            raise MaidenError(f"the {failed[0]} channel stopped unexpectedly")
