"""The application: config -> store -> runtime -> HTTP API (-> channels and schedules, later).

`maiden run` composes everything in one lifespan. Startup: open the store, recover
every unfinished run, then start intake (the HTTP API). Shutdown on SIGTERM or
SIGINT: stop intake, let in-flight runs reach a checkpoint (``[runtime]
shutdown_grace_s``), close the server, the runtime and the store; exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, TextIO

from runtime import (
    ACTIVE_STATES,
    ConfigError,
    MaidenError,
    Run,
    Runtime,
    make_provider,
    make_store,
    make_tools,
)

from .config import LoadedConfig
from .logging import RunContext, log_runs

if TYPE_CHECKING:
    from channels.http import HttpApi
    from channels.http_server import HttpServer

__all__ = ["banner", "http_token", "open_runtime", "serve"]

log = logging.getLogger("maiden.app")


@asynccontextmanager
async def open_runtime(
    loaded: LoadedConfig, *, recover: bool, serve: bool = False
) -> AsyncIterator[Runtime]:
    """Open the store and a runtime over it; with ``recover``, finish unfinished runs first;
    with ``serve``, answer other processes' requests (approve, cancel) for its runs."""
    cfg = loaded.config
    tools = make_tools(cfg.tools, loaded.base_dir)
    provider = make_provider(cfg.provider, loaded.base_dir)
    async with AsyncExitStack() as stack:
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            stack.push_async_callback(aclose)
        store = make_store(cfg.store, loaded.base_dir)
        await store.open()
        stack.push_async_callback(store.close)
        runtime = Runtime(store, provider, tools, agent=cfg.agent, budget=cfg.budget,
                          prices=cfg.provider.prices, settings=cfg.runtime)
        stack.push_async_callback(runtime.close)
        if recover or serve:
            await runtime.start(recover=recover, serve=serve)
        yield runtime


def http_token(loaded: LoadedConfig) -> str | None:
    """The API's bearer token, from the variable ``[http] token_env`` names.

    Without one, refuse (``ConfigError``) to listen on anything but loopback: the API
    runs tools, and anyone who can reach it could make it do so.
    """
    from channels.http_server import is_loopback

    http = loaded.config.http
    token = os.environ.get(http.token_env) if http.token_env else None
    if not token and not is_loopback(http.host):
        why = f"${http.token_env} is not set" if http.token_env else "no [http] token_env"
        raise ConfigError([("http.host", (
            f"{http.host!r} is not a loopback address and {why}: without a token the HTTP "
            "API only listens on 127.0.0.1 / ::1. Set [http] token_env to a variable holding "
            "a long random token (clients send 'Authorization: Bearer <token>'), or use "
            "host = \"127.0.0.1\""))], str(loaded.path))
    return token or None


def banner(
    loaded: LoadedConfig, runtime: Runtime, recovered: list[Run], *, http: str | None = None
) -> str:
    """One screen: what this process serves, from where, and what it recovered."""
    cfg = loaded.config
    source = str(loaded.path) if loaded.exists else f"{loaded.path} (not found: defaults)"
    if not cfg.http.enabled:
        http_line = "disabled ([http] enabled = false)"
    elif http is None:
        http_line = "not started"
    elif cfg.http.token_env and os.environ.get(cfg.http.token_env):
        http_line = f"{http}  (bearer token from ${cfg.http.token_env})"
    else:
        unset = f"${cfg.http.token_env} not set, " if cfg.http.token_env else ""
        http_line = f"{http}  (no token: {unset}loopback only)"
    lines = [
        f"maiden: agent {cfg.agent.name!r}",
        f"  config      {source}",
        f"  provider    {cfg.provider.kind}" + (f" ({cfg.provider.model})"
                                                if cfg.provider.model else ""),
        f"  store       {cfg.store.kind} at {loaded.base_dir / cfg.store.path}",
        f"  concurrency {cfg.runtime.concurrency}",
        f"  tools       {', '.join(t.name for t in runtime.tools) or 'none'}",
        f"  http        {http_line}",
        "  slack       not configured (no [channels.slack])",
        "  discord     not configured (no [channels.discord])",
        "  schedules   none",
        f"  recovered   {len(recovered)} unfinished run(s)",
    ]
    for run in recovered:
        lines.append(f"    {run.id} on {run.thread_id!r}: {run.state} ({run.reason})")
    where = f"over HTTP at {http}, " if http else ""
    lines.append(f"Ready. Talk to it {where}with `maiden chat` or `maiden send THREAD TEXT`; "
                 "Ctrl-C stops.")
    return "\n".join(lines)


async def serve(
    loaded: LoadedConfig, out: TextIO = sys.stdout, *, context: RunContext | None = None
) -> None:
    """`maiden run`: recover, then serve until SIGINT or SIGTERM."""
    cfg = loaded.config
    token = http_token(loaded) if cfg.http.enabled else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_runtime(loaded, recover=False) as runtime:
            if context is not None:  # recovery logs before the runs' first events
                for run in await runtime.store.list_runs(states=ACTIVE_STATES):
                    context.remember(run.id, run.thread_id)
            logger = asyncio.create_task(log_runs(runtime, context), name="maiden-log-runs")
            try:
                recovered = await _recover(runtime, stop)
                if recovered is not None:
                    await _serve(loaded, runtime, recovered, token, stop, out)
            finally:
                logger.cancel()
                await asyncio.gather(logger, return_exceptions=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    log.info("stopped")


async def _recover(runtime: Runtime, stop: asyncio.Event) -> list[Run] | None:
    """Recover every unfinished run; None if a signal came first (runs then checkpoint)."""
    starting = asyncio.create_task(runtime.start(recover=True, serve=True))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if starting.done():
        return starting.result()
    log.info("stopping during recovery")
    await runtime.close()
    await starting
    return None


async def _serve(
    loaded: LoadedConfig, runtime: Runtime, recovered: list[Run], token: str | None,
    stop: asyncio.Event, out: TextIO,
) -> None:
    api: HttpApi | None = None
    server: HttpServer | None = None
    if loaded.config.http.enabled:
        api, server = _http(loaded, runtime, token)
        await server.start()
    try:
        out.write(banner(loaded, runtime, recovered,
                         http=server.url if server else None) + "\n")
        out.flush()
        stopping = asyncio.create_task(stop.wait())
        watched = [stopping] + ([server.task] if server else [])
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if server is not None and server.task.done():
            raise MaidenError("the HTTP server stopped unexpectedly")
        out.write("maiden: stopping\n")
        out.flush()
        log.info("stopping: no new messages; letting runs reach a checkpoint")
        if api is not None:
            api.stop_intake()
        await runtime.close()
    finally:
        if api is not None:
            api.release()
        if server is not None:
            await server.stop()


def _http(loaded: LoadedConfig, runtime: Runtime, token: str | None) -> tuple[HttpApi, HttpServer]:
    from channels.http import create_app
    from channels.http_models import HttpSettings
    from channels.http_server import HttpServer

    http = loaded.config.http
    app = create_app(runtime, HttpSettings(
        token=token, max_body_bytes=http.max_body_bytes,
        max_message_chars=http.max_message_chars))
    api: HttpApi = app.state.maiden
    return api, HttpServer(app, http.host, http.port)

