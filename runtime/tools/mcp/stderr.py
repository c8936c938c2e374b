"""A stdio MCP server's stderr: logged, and its last lines kept to say why it stopped."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from contextlib import suppress

__all__ = ["StderrLog"]


class StderrLog:
    """A stdio server's stderr, through a pipe: each line logged at debug level, the last
    ones kept to say why it stopped."""

    def __init__(self, name: str) -> None:
        self._log = logging.getLogger(f"maiden.mcp.{name}")
        read_fd, write_fd = os.pipe()
        self._read = os.fdopen(read_fd, "rb", buffering=0)
        self.writer = os.fdopen(write_fd, "w")
        """The pipe's write end, handed to the process (and closed here once it has it)."""
        self.lines: deque[str] = deque(maxlen=20)
        self._eof = asyncio.Event()
        self._pipe: asyncio.ReadTransport | None = None
        self._pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StderrLog:
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        self._pipe, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._read)
        self._pump = asyncio.create_task(self._run(reader), name=f"{self._log.name}-stderr")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        if self._pipe is not None:
            self._pipe.close()
            await asyncio.sleep(0)  # the pipe's file closes on the next turn of the loop
        else:
            self._read.close()

    def spawned(self) -> None:
        """The process has its copy of the write end: ours goes, so its exit is our EOF."""
        self.writer.close()

    async def tail(self, wait_s: float = 0.5) -> str:
        """Its last few lines (after waiting a little for a dead process's last words)."""
        if not self.writer.closed:
            wait_s = 0  # never spawned: nothing will come
        with suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self._eof.wait()
        return " | ".join(list(self.lines)[-3:])

    async def _run(self, reader: asyncio.StreamReader) -> None:
        pending = b""
        try:
            while chunk := await reader.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-4096:]
                for line in lines:
                    self._keep(line)
            self._keep(pending)
        finally:
            self._eof.set()

    def _keep(self, raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip()
        if text.strip():
            self.lines.append(text[:300])
            self._log.debug("%s", text)
