"""Opening the configured store, and what a failure to open it means to an operator;
starting the runtime over it.

A store that cannot be opened is, as a rule, a configuration problem (``ConfigError`` on
the key to look at): a folder that cannot be made, a file that is not a database, a
password the server refuses. A PostgreSQL server that cannot be reached (refused, reset,
timed out) may only be starting, or restarting, and a full disk may be freed in a moment:
``maiden run`` tries it again for ``[store] open_wait_s`` before it gives up, saying each
time what it waits for, as it waits for Slack or Discord; and so does its recovery of
unfinished runs, if the store goes out of reach as it starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runtime import (
    ConfigError,
    Failed,
    Run,
    Runtime,
    StaleWrite,
    Store,
    StoreError,
    StoreFull,
    StoreGone,
    StoreUnreachable,
    describe_store,
    make_store,
    retrying,
    within,
)

from .config import LoadedConfig

__all__ = ["open_store", "patiently", "start_runtime", "starting_again"]

log = logging.getLogger("maiden")

T = TypeVar("T")

FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 5.0


async def open_store(loaded: LoadedConfig, *, wait: bool) -> Store:
    """The configured store, opened; with ``wait``, a server out of reach or a full disk is
    tried again for ``[store] open_wait_s``. ``ConfigError`` naming the key when it cannot
    be opened."""
    cfg = loaded.config.store
    try:
        store = make_store(cfg, loaded.base_dir)
    except ConfigError as error:
        raise error.located(str(loaded.path)) from None
    where = describe_store(cfg, loaded.base_dir)
    try:
        await _again(store.open, wait_s=cfg.open_wait_s if wait else 0.0,
                     worth=lambda error: isinstance(error, StoreUnreachable | StoreFull),
                     said=f"the store ({where}) is out of reach" if cfg.kind == "postgres"
                     else f"the store ({where}) has no room to open")
    except (StoreUnreachable, StoreFull) as error:
        waited = f" (tried for {cfg.open_wait_s:g} s)" if wait else ""
        raise _problem(loaded, f"{error}{waited}") from None
    except (StoreError, OSError) as error:
        raise _problem(loaded, error) from None
    return store


async def start_runtime(runtime: Runtime, *, wait_s: float) -> list[Run]:
    """``runtime.start(recover=True, serve=True)``, started again after a store error (the
    server out of reach as recovery began, say: what was done is in the store, and what
    was not is found again), for ``wait_s`` at most; the runs recovered."""
    return await patiently(lambda: runtime.start(recover=True, serve=True), wait_s=wait_s,
                           what="recovery")


async def patiently(call: Callable[[], Awaitable[T]], *, wait_s: float, what: str) -> T:
    """``call()``, made again after a store error for ``wait_s`` at most (a pause that
    doubles up to 5 s between tries, one warning line each): for the steps of `maiden run`'s
    start that read or write the store (``call`` must be safe to make again). A store that
    is gone, or a write that found another one before it, is no store out of reach: raised."""
    return await _again(call, wait_s=wait_s, worth=_out_of_reach,
                        said=f"{what} stopped on a store error")


async def starting_again(start: Callable[[asyncio.Event], Awaitable[None]],
                         stop: asyncio.Event, *, wait_s: float) -> None:
    """``start(ready)``: `maiden run`'s whole lifespan, begun again from the top (the store
    opened anew) when a store error ends it before it said "Ready" (``ready`` set), for
    ``wait_s`` at most: a step of its start that reads the store and is not ``patiently``
    made (a channel's lease, the banner's facts) must not end the process in a cut. Not
    after "Ready", nor once asked to stop."""
    ready = asyncio.Event()

    async def lifespan() -> None:
        ready.clear()
        await start(ready)

    await _again(lifespan, wait_s=wait_s,
                 worth=lambda error: _out_of_reach(error) and not ready.is_set()
                 and not stop.is_set(),
                 said="maiden run's start stopped on a store error", again="starting again")


def _out_of_reach(error: StoreError) -> bool:
    """Whether a store error may pass if tried again: not a store that is gone, nor a
    write that found another one before it."""
    return not isinstance(error, StoreGone | StaleWrite)


async def _again(call: Callable[[], Awaitable[T]], *, wait_s: float,
                 worth: Callable[[StoreError], bool], said: str,
                 again: str = "trying again") -> T:
    """``call()``, made again after a store error that is ``worth`` it, for ``wait_s`` at
    most, the pause doubling from 0.5 s up to 5 s, one warning line a try (``said``)."""
    pause = within(wait_s, FIRST_PAUSE_S, LONGEST_PAUSE_S, worth)

    def told(failed: Failed[StoreError], seconds: float) -> None:
        log.warning("%s (%s); %s in %.1f s", said, failed.error, again, seconds)

    return await retrying(call, on=StoreError, pause=pause, told=told)


def _problem(loaded: LoadedConfig, error: object) -> ConfigError:
    cfg = loaded.config.store
    if cfg.kind == "postgres":
        return ConfigError([("store.dsn_env", f"cannot open the postgres store "
                             f"({describe_store(cfg, loaded.base_dir)}): {error}")],
                           str(loaded.path))
    where = loaded.base_dir / cfg.path
    exc = error.__cause__ if isinstance(error, BaseException) and isinstance(
        error.__cause__, OSError) else error
    if isinstance(exc, FileExistsError | NotADirectoryError):
        reason = f"{exc.filename} is a file, where a folder is needed"
    elif isinstance(exc, OSError):
        reason = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
    else:
        reason = str(exc)
    return ConfigError([("store.path", f"cannot open the {cfg.kind} store at {where}: "
                         f"{reason}")], str(loaded.path))
