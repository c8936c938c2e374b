"""Tools the runtime tests share."""

from __future__ import annotations

import asyncio

from runtime import Tool, tool


def until_cut_off() -> tuple[Tool, asyncio.Event]:
    """A tool ``forever`` that waits until its call is cut off (cancelled, timed out),
    and the event that says it was."""
    stopped = asyncio.Event()

    @tool
    async def forever() -> str:
        """Wait until cancelled."""
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    return forever, stopped
