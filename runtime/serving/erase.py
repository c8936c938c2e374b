"""Erasing a thread, as the runtime does it (``Runtime.delete_thread``): the thread's runs
that have not ended are cancelled first, wherever they run (a run another process drives
is cancelled by that process, its tools stopped where they run); then the store removes
the thread and everything of it in one durable write (``stores.erasure``), which it refuses
while a run of the thread has not ended: a message that came in meanwhile is cancelled in
turn, and the write tried again. The files it alone carried that a ``[[knowledge]]``
source indexed (``shared_in``) are dropped right after (``shared_files.drop_unshared``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..errors import NotFound, RunError, StaleWrite
from ..model.runs import Run
from ..stores.base import Store, check_thread_id
from ..stores.erasure import Erased
from .shared_files import drop_unshared
from .workers import ACTIVE

__all__ = ["ATTEMPTS", "erase_thread"]

ATTEMPTS = 5
"""Rounds of cancelling and erasing before giving up on a thread that keeps getting runs."""


async def erase_thread(store: Store, thread_id: str,
                       cancel: Callable[[str], Awaitable[Run]]) -> Erased:
    """Cancel the thread's runs that have not ended (``cancel(run_id)``), then erase it;
    ``RunError("delete_failed")`` if new runs kept coming in."""
    check_thread_id(thread_id)
    for _ in range(ATTEMPTS):
        for run in await store.list_runs(thread_id=thread_id, states=ACTIVE):
            try:
                await cancel(run.id)
            except NotFound:
                pass  # erased meanwhile, by another process
            except RunError as exc:
                if exc.reason != "already_ended":  # it ended meanwhile: as good
                    raise
        try:
            erased = await store.delete_thread(thread_id)
        except StaleWrite:
            await asyncio.sleep(0)  # a run came in meanwhile: it is cancelled next round
            continue
        if erased.blobs:  # a file shared there may have been indexed as knowledge
            await drop_unshared(store, store)
        return erased
    raise RunError("delete_failed", f"thread {thread_id!r} kept getting new messages while "
                   "it was being deleted; try again")
