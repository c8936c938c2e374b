"""Helpers for the HTTP API tests: a runtime, the real server on a free port, SSE reading."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx

from channels.access import RIGHTS
from channels.http import HttpConfig
from channels.http.app import HttpApi, create_app
from channels.http.auth import Credential, Credentials
from channels.http.config import OpenAIApiConfig
from channels.http.server import HttpServer
from runtime import (
    AgentConfig,
    EchoProvider,
    Indexer,
    Provider,
    Runtime,
    RuntimeConfig,
    ScheduleService,
    SQLiteStore,
    Tool,
    ToolsConfig,
    Tracing,
    make_tools,
)
from runtime.engine.tracing import NO_TRACING
from runtime.stores.sqlite import Synchronous
from schedules import ScheduleBook, ScheduleConfig, Scheduler, load_schedules
from schedules.hooks import Hook

Concurrency = Literal["global", "thread"]  # RuntimeConfig.concurrency


@asynccontextmanager
async def echo_runtime(
    db: Path,
    tools: Sequence[Tool] = (),
    *,
    provider: Provider | None = None,
    concurrency: Concurrency = "global",
    shutdown_grace_s: float = 10.0,
    synchronous: Synchronous = "full",
    tracing: Tracing = NO_TRACING,
    **agent: Any,
) -> AsyncIterator[Runtime]:
    """A runtime over a real SQLite store with the clock tool and ``tools``; the echo model
    unless ``provider`` is given."""
    settings = RuntimeConfig(concurrency=concurrency,
                             shutdown_grace_s=shutdown_grace_s, poll_interval_s=0.1)
    registry = make_tools(ToolsConfig(), db.parent)  # the built-in clock
    for extra in tools:
        registry.add(extra)
    store = SQLiteStore(db, synchronous=synchronous)
    runtime = Runtime(store, provider or EchoProvider(), registry, agent=AgentConfig(**agent),
                      settings=settings, tracing=tracing)
    async with store, runtime:
        yield runtime


@asynccontextmanager
async def scheduled(runtime: Runtime, db: Path, configs: Sequence[ScheduleConfig],
                    clock: Callable[[], datetime], hooks: Sequence[Hook] = ()
                    ) -> AsyncIterator[Scheduler]:
    """A scheduler of ``configs`` (no timers: the test fires them) and ``hooks`` that
    submits to ``runtime``, its book over the SQLite store at ``db`` (the runtime's)."""
    async with SQLiteStore(db) as store:
        book = ScheduleBook(store, load_schedules(configs, default_timezone="UTC",
                                                  channels=[]), clock=clock, hooks=hooks)
        async with Scheduler(book, runtime, timers=False) as scheduler:
            yield scheduler


@asynccontextmanager
async def served(
    runtime: Runtime, *, token: str | None = None, credentials: Credentials | None = None,
    schedules: ScheduleService | None = None, openai: OpenAIApiConfig | None = None,
    knowledge: Indexer | None = None, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, HttpApi]]:
    """The app under uvicorn on 127.0.0.1:<free port>, and a client pointed at it (with
    ``token``, or else the first of ``credentials``, as its bearer token); ``schedules``:
    what it lists and runs (as `maiden run` gives it its scheduler); ``knowledge``: the
    indexer whose sources the console shows."""
    config = HttpConfig(**settings)
    app = create_app(runtime, config, token=token, credentials=credentials,
                     schedules=schedules, openai=openai, knowledge=knowledge)
    server = HttpServer(app, "127.0.0.1", 0, grace_s=2, header_timeout_s=config.header_timeout_s,
                        max_connections=config.max_connections)
    await server.start()
    first = next(iter(credentials or ()), None)
    bearer = token or (first.token if first is not None else None)
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=headers,
                                     timeout=httpx.Timeout(10.0)) as client:
            yield client, app.state.maiden
    finally:
        app.state.maiden.release()
        await server.stop()


def tokens(*named: tuple[Any, ...]) -> Credentials:
    """``tokens(("alice", "t-a"), ("bob", "t-b", ["talk"]), ("eve", "t-e", ["talk"],
    ["support/*"]))``: named tokens (every right unless listed; the thread patterns they
    may see besides their own)."""
    return Credentials([Credential(n[0], n[1], frozenset(n[2] if len(n) > 2 else RIGHTS),
                                   tuple(n[3]) if len(n) > 3 else ())
                        for n in named])


def thread_url(thread_id: str, suffix: str = "") -> str:
    """``/v1/threads/<id><suffix>`` with every reserved character (dots too) escaped."""
    return f"/v1/threads/{quote(thread_id, safe='').replace('.', '%2E')}{suffix}"


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a text/event-stream response, as they arrive."""
    kind = "message"
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


STREAM = {"Accept": "text/event-stream"}


def banner_url(lines: Iterable[str]) -> str:
    """The HTTP URL a ``maiden run`` banner names, read up to its ``Ready.`` line ("" when
    the banner ends without one)."""
    url = ""
    for line in lines:
        if line.startswith("  http "):
            url = line.split()[1]
        if line.startswith("Ready."):
            break
    return url
