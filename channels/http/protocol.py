"""uvicorn's h11 protocol with a deadline on a request's headers (slowloris).

uvicorn bounds an idle kept-alive connection (``timeout_keep_alive``) but not one that
is *in* a request: a client that sends ``GET / HTTP/1.1\\r\\nHost: x\\r\\n`` and then
nothing holds its socket (a file descriptor) for ever, and a few hundred of them
exhaust the process's descriptors. This subclass arms one timer per request, from the
connection's opening (or the first byte of the next request on a kept-alive connection)
to the end of its headers; if it fires first, the client gets ``408 Request Timeout``
(or, if it sent nothing at all, just a close) and the socket is freed. The timer is not
pushed back by each byte, so trickling headers in does not help.

Why a subclass and not our own parser or a proxy: h11 already knows exactly when a
request's headers are complete (its ``their_state`` leaves ``IDLE``), so the extension
is a timer around uvicorn's own event handling, three hooks and no HTTP of our own.
It pins the pure-Python h11 implementation (``HttpServer`` passes it as the protocol
class, so uvicorn never picks httptools behind its back), which is what was running
anyway: httptools is not a dependency.

The cap on connections is uvicorn's own ``limit_concurrency``: over it, a request is
answered 503 with ``Connection: close`` once its headers are in, so a client never
hangs; this deadline bounds how long an over-the-cap connection can hold its socket
without sending them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DeadlineConfig", "HeaderDeadlineProtocol"]

_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
              b"connection: close\r\ncontent-length: 52\r\n\r\n"
              b"the request's headers did not arrive within the time")


class DeadlineConfig(uvicorn.Config):
    """uvicorn's config with the header deadline the protocol reads."""

    def __init__(self, app: Any, *, header_timeout_s: float, **options: Any) -> None:
        super().__init__(app, http=HeaderDeadlineProtocol, **options)
        self.header_timeout_s = header_timeout_s


class HeaderDeadlineProtocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request headers come too late."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        assert isinstance(config, DeadlineConfig), "serve with DeadlineConfig"
        self._header_timeout_s = config.header_timeout_s
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()

    def handle_events(self) -> None:
        # Every byte received, and the end of every response, goes through here.
        super().handle_events()
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _watch_headers(self) -> None:
        """Arm the deadline while a request's headers are awaited, else disarm it.

        Awaited: h11 is before a request (``IDLE``) and either none came yet on this
        connection, or some bytes of the next one did. A kept-alive connection that is
        silent between requests is left to uvicorn's keep-alive timeout.
        """
        before_request = self.conn.their_state is h11.IDLE
        started = self.cycle is None or bool(self.conn.trailing_data[0])
        if before_request and started:
            if self._deadline is None and not self.transport.is_closing():
                self._deadline = self.loop.call_later(self._header_timeout_s, self._late)
        else:
            self._disarm()

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:  # a partial request: say why it is closed
            self.transport.write(_TIMED_OUT)
        self.transport.close()
