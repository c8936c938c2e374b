"""A run's preludes: what its tools put before its first model turn, unasked
(``tools.prelude``). Asked only as a queued run's message enters its thread, and committed
with it (``beginning``): never again for that run, so a crash, a restart or a resume finds
them in the thread rather than asking anew."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..model.entries import Notice
from ..tools.base import Tool
from ..tools.prelude import Opening

__all__ = ["preludes"]

log = logging.getLogger("maiden.loop")


async def preludes(tools: Iterable[Tool], opening: Opening,
                   services: Mapping[str, Any]) -> list[Notice]:
    """The notices of the tools' preludes, in the tools' order. One that fails or takes
    longer than its tool's timeout is left out (logged): a prelude helps the model, it is
    never a reason for a run not to start."""
    notices = []
    for tool in tools:
        if tool.prelude is None:
            continue
        given = {n: services[n] for n in tool.needs if n in services}
        try:
            async with asyncio.timeout(tool.timeout_s):
                notice = await tool.prelude(_with(opening, given))
        except Exception as exc:
            log.warning("run %s: the prelude of %s failed (%s: %s); left out",
                        opening.run_id, tool.name, type(exc).__name__, exc)
            continue
        if notice is not None:
            notices.append(notice)
    return notices


def _with(opening: Opening, services: Mapping[str, Any]) -> Opening:
    return Opening(run_id=opening.run_id, thread_id=opening.thread_id, agent=opening.agent,
                   text=opening.text, origin=opening.origin, at=opening.at,
                   window=opening.window, idempotency_key=opening.idempotency_key,
                   thread=opening.thread, services=services)
