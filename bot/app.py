"""The application: config -> store -> runtime (-> channels and schedules, later)."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TextIO

from runtime import Run, Runtime, make_provider, make_store, make_tools

from .config import LoadedConfig

__all__ = ["banner", "open_runtime", "serve"]

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


def banner(loaded: LoadedConfig, runtime: Runtime, recovered: list[Run]) -> str:
    cfg = loaded.config
    source = str(loaded.path) if loaded.exists else f"{loaded.path} (not found: defaults)"
    lines = [
        f"maiden: agent {cfg.agent.name!r}",
        f"  config      {source}",
        f"  provider    {cfg.provider.kind}" + (f" ({cfg.provider.model})"
                                                if cfg.provider.model else ""),
        f"  store       {cfg.store.kind} at {loaded.base_dir / cfg.store.path}",
        f"  concurrency {cfg.runtime.concurrency}",
        f"  tools       {', '.join(t.name for t in runtime.tools) or 'none'}",
        "  channels    none yet (the HTTP API, Slack and Discord come in later versions)",
        f"  recovered   {len(recovered)} unfinished run(s)",
    ]
    for run in recovered:
        lines.append(f"    {run.id} on {run.thread_id!r}: {run.state} ({run.reason})")
    lines.append("Ready. Talk to it with `maiden chat` or `maiden send THREAD TEXT`; "
                 "Ctrl-C stops.")
    return "\n".join(lines)


async def serve(loaded: LoadedConfig, out: TextIO = sys.stdout) -> None:
    """`maiden run`: recover, then serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_runtime(loaded, recover=True, serve=True) as runtime:
            out.write(banner(loaded, runtime, runtime.recovered) + "\n")
            out.flush()
            await stop.wait()
            out.write("maiden: stopping\n")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
