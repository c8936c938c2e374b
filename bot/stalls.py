"""A stop that takes long says what it waits on: ``STOP_SLOW_S`` after SIGTERM or SIGINT,
if maiden has not stopped yet, the tasks still running are logged once, each with the
chain of awaits it is suspended in (innermost last). A process that hangs on its way out
is then killed by its supervisor with a line saying why (the chaos soak's replicas did
not stop within 30 s of SIGTERM a few times, with nothing in their logs to say why)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

__all__ = ["STOP_SLOW_S", "awaiting", "said_if_slow"]

log = logging.getLogger("maiden.app")

STOP_SLOW_S = 15.0
"""Past ``[runtime] shutdown_grace_s`` (10 s by default) and short of a supervisor's usual
patience (systemd's 90 s, Kubernetes' 30 s)."""


async def said_if_slow(stop: asyncio.Event, after_s: float = STOP_SLOW_S) -> None:
    """Once ``stop`` is set and ``after_s`` have passed, log what is still running. Meant
    to be cancelled when the stop is done."""
    await stop.wait()
    await asyncio.sleep(after_s)
    me = asyncio.current_task()
    tasks = sorted((t for t in asyncio.all_tasks() if t is not me and not t.done()),
                   key=lambda t: t.get_name())
    log.warning("stopping has taken over %.0f s; still running:\n%s", after_s,
                "\n".join(f"  {t.get_name()}: {awaiting(t)}" for t in tasks))


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where ``task`` is suspended: its coroutines, outermost first (``file:line
    function``), down to what the innermost awaits."""
    steps: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(steps) < 40:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None) \
            or getattr(awaited, "ag_frame", None)
        if frame is None:  # a future (its iterator, in C: FutureIter), or a coroutine ended
            steps.append(type(awaited).__name__.removesuffix("Iter"))
            break
        where = Path(frame.f_code.co_filename)
        steps.append(f"{where.parent.name}/{where.name}:{frame.f_lineno} "
                     f"{frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None) \
            or getattr(awaited, "ag_await", None)
    return " > ".join(steps)
