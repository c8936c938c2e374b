"""A message with files as ``multipart/form-data``: the part named ``message`` is the
message's JSON, every part with a file name is a file. Turned here into the JSON body the
message route reads (the files in base64), so both forms go through one model, one set
of checks and one schema."""

from __future__ import annotations

import base64
import json
from typing import Any

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import problem

__all__ = ["MultipartMessages", "is_multipart_message", "replaying"]

_MAX_FIELDS = 20
_TOO_MANY = "Too many files."
"""How Starlette's parser begins its error for files past ``max_files`` (starlette/
formparsers.py): a message over ``max_per_message`` by one is read, and refused as the JSON
form is (422, ``file_refused``); by more, the parser stops first and this says so alike."""


def is_multipart_message(scope: Scope) -> bool:
    """A POST of a multipart body to a thread's messages."""
    if scope["type"] != "http" or scope["method"] != "POST" \
            or not scope["path"].endswith("/messages") or not scope["path"].startswith(
                "/v1/threads/"):
        return False
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"multipart/form-data")
    return False


class MultipartMessages:
    """ASGI middleware: a multipart message becomes its JSON form; anything else passes."""

    def __init__(self, app: ASGIApp, max_files: int) -> None:
        self.app = app
        self.max_files = max_files

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_multipart_message(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            form = await request.form(max_files=self.max_files + 1, max_fields=_MAX_FIELDS)
        except (MultiPartException, HTTPException) as exc:
            detail = exc.message if isinstance(exc, MultiPartException) else exc.detail
            if str(detail).startswith(_TOO_MANY):  # what the JSON form is told, too
                await problem(422, f"more than {self.max_files + 1} files: at most "
                                   f"{self.max_files} are read from one message ([files] "
                                   "max_per_message)", "file_refused")(scope, receive, send)
                return
            await problem(400, f"the multipart body cannot be read: {detail}",
                          "invalid_multipart")(scope, receive, send)
            return
        try:
            body = await _as_json(form.multi_items())
        except ValueError as exc:
            await problem(422, str(exc), "invalid_multipart")(scope, receive, send)
            return
        finally:
            await form.close()
        headers = [(k, v) for k, v in scope["headers"]
                   if k not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]
        await self.app({**scope, "headers": headers}, replaying(body, receive), send)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the app ``body`` (read already) whole, then ``receive``'s
    messages (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _as_json(items: list[tuple[str, str | UploadFile]]) -> bytes:
    message: Any = None
    files: list[dict[str, Any]] = []
    for key, value in items:
        if isinstance(value, UploadFile):
            data = await value.read()
            files.append({"name": value.filename or key, "media_type": value.content_type,
                          "data": base64.b64encode(data).decode()})
        elif key == "message":
            try:
                message = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"the part 'message' is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ValueError("a multipart message needs a part named 'message' holding the "
                         "message's JSON object (e.g. {\"text\": \"...\"}), and a part per file")
    given = message.get("files", [])
    message["files"] = (given if isinstance(given, list) else [given]) + files
    return json.dumps(message).encode()
