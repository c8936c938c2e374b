"""The request body's size limit, checked before the app reads it."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import early_refusal
from .multipart import is_multipart_message, replaying

__all__ = ["BodyLimit"]


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, before the app reads them.

    The body is read here in full (it is small by definition) and handed on, so a
    chunked body is measured as well as one with a Content-Length.
    """

    def __init__(self, app: ASGIApp, limit: int, multipart_limit: int | None = None) -> None:
        self.app = app
        self.limit = limit
        self.multipart_limit = multipart_limit or limit
        """For a message with its files in a multipart body (``multipart``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.multipart_limit if is_multipart_message(scope) else self.limit
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, receive, send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, receive, send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        why = "[http] max_body_bytes" if limit == self.limit else \
            "[http] max_body_bytes and [files] max_bytes * max_per_message"
        detail = f"the request body is larger than {limit} bytes ({why})"
        response = early_refusal(scope["path"], 413, detail, "body_too_large")
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
