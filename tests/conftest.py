"""Shared fixtures: a real SQLite store in tmp_path and a runtime over a scripted model."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import (
    AgentConfig,
    BudgetConfig,
    FilesStore,
    Prices,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    Tool,
    ToolRegistry,
)

# A suite started with SIGINT ignored (a background job of a shell without job control, as
# some CI runners start it) would hand that on to every process the tests start, and the
# tests of Ctrl-C would wait in vain: here Ctrl-C is Python's default, whoever started it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

RuntimeFactory = Callable[..., Any]

# The suite spawns about a thousand processes (crash drivers, servers, CLIs) from xdist
# workers with other threads running. On this CI's VM, CPython's vfork path (the GIL is
# released while the child shares the worker's memory) has twice failed one spawn with
# "OSError: [Errno 14] Bad address" from execve, before the child ran a line of ours; a
# plain fork gives the child its own copy. The bot's own spawning is left as it is.
subprocess._USE_VFORK = False  # type: ignore[misc]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject addopts): two workers a core. The suite waits more than it
    computes (processes starting, fakes and replicas answering, timers): on 2 cores with a
    worker a core they were busy 45% of its 7 minutes; with two a core it took 5."""
    return 2 * len(os.sched_getaffinity(0))


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder the shell tool may work in: as root, maiden runs commands as ``[tools.shell]
    run_as`` (nobody), who cannot enter pytest's ``tmp_path`` (private to root)."""
    path = Path(tempfile.mkdtemp(prefix="maiden-shared-"))
    path.chmod(0o777)
    try:
        yield path.resolve()
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_runtime(tmp_path: Path) -> RuntimeFactory:
    """``async with make_runtime(script, tools, max_turns=3) as (rt, provider): ...``"""

    @asynccontextmanager
    async def factory(
        script: Sequence[dict[str, Any]] = (),
        tools: Sequence[Tool] = (),
        *,
        concurrency: str = "global",
        db: Path | None = None,
        budget: dict[str, Any] | None = None,
        prices: dict[str, float] | None = None,
        clock: Any = None,
        store: str = "sqlite",
        provider: Callable[[ScriptedProvider], Any] | None = None,
        settings: dict[str, Any] | None = None,
        deliverers: dict[str, Any] | None = None,
        fetchers: dict[str, Any] | None = None,
        **agent: Any,
    ) -> AsyncIterator[tuple[Runtime, Any]]:
        """``provider`` wraps the scripted model (the pair then holds the wrapper);
        ``deliverers`` and ``fetchers``: the channels' the runtime is built with."""
        scripted = ScriptedProvider(script)
        model = scripted if provider is None else provider(scripted)
        backend = SQLiteStore(db or tmp_path / "maiden.db") if store == "sqlite" \
            else FilesStore(db or tmp_path / "files")
        async with backend as opened:
            extra = {"clock": clock} if clock is not None else {}
            rt = Runtime(opened, model, ToolRegistry(tools), agent=AgentConfig(**agent),
                         budget=BudgetConfig(**(budget or {})), prices=Prices(**(prices or {})),
                         settings=RuntimeConfig(concurrency=concurrency, **(settings or {})),
                         deliverers=deliverers, fetchers=fetchers, **extra)
            async with rt:
                yield rt, model

    return factory


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A real httpx client, closed after the test."""
    async with httpx.AsyncClient() as c:
        yield c


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A folder with the default agent.toml, for `maiden` subprocesses to run in."""
    root = Path(__file__).resolve().parent.parent
    shutil.copy(root / "agent.toml", tmp_path / "agent.toml")
    with (tmp_path / "agent.toml").open("a") as f:
        f.write("\n[http]\nport = 0   # `maiden run` serves the API on any free port\n")
    return tmp_path
