"""The fake Discord's CDN: attachments people post, served at signed, expiring URLs as
``cdn.discordapp.com`` serves them (``?ex=&is=&hm=``; a bad or missing signature is a 404
with Discord's words), with no token asked for. A download can be held half-way
(``hold``): a process killed or stopped in the middle of one."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from aiohttp import web

from . import payloads as p
from .payloads import JSON

__all__ = ["Cdn"]

_KEY = secrets.token_bytes(16)


def _sign(path: str, expires: str) -> str:
    return hmac.new(_KEY, f"{path}:{expires}".encode(), hashlib.sha256).hexdigest()


@dataclass
class Cdn:
    """Files by attachment id; ``downloads``: every request, ``(attachment id, signed)``."""

    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    downloads: list[tuple[str, bool]] = field(default_factory=list)
    held: dict[str, asyncio.Event] = field(default_factory=dict)
    """Attachment id -> set once its held download has sent half the file (``hold``)."""
    held_from: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Attachment id -> the client address (host, port) its held download went to."""

    def hold(self, attachment_id: str) -> asyncio.Event:
        """The next signed download of ``attachment_id`` sends its headers and half the
        file, then waits until the client goes away (or the fake stops): a download under
        way. The event returned is set once the half is sent."""
        self.held[attachment_id] = asyncio.Event()
        return self.held[attachment_id]

    def add(self, base: str, channel_id: str, name: str, data: bytes, content_type: str
            ) -> JSON:
        """Store a file and return the attachment object a message carries."""
        attachment_id = str(p.new_id())
        self.files[attachment_id] = (data, content_type)
        path = f"/attachments/{channel_id}/{attachment_id}/{name}"
        expires = f"{int(time.time()) + 86_400:x}"
        query = f"?ex={expires}&is={int(time.time()):x}&hm={_sign(path, expires)}&"
        return {"id": attachment_id, "filename": name, "size": len(data),
                "content_type": content_type, "url": base + path + query,
                "proxy_url": base + path + query}

    async def serve(self, request: web.Request) -> web.StreamResponse:
        attachment_id = request.match_info["id"]
        path = request.path
        expires = request.query.get("ex", "")
        signed = hmac.compare_digest(request.query.get("hm", ""), _sign(path, expires))
        self.downloads.append((attachment_id, signed))
        found = self.files.get(attachment_id)
        if not signed or found is None:
            return web.Response(status=404, text="This content is no longer available.")
        data, content_type = found
        held = self.held.pop(attachment_id, None)
        if held is None:
            return web.Response(body=data, content_type=content_type)
        response = web.StreamResponse(headers={"Content-Type": content_type})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[:len(data) // 2])
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.held_from[attachment_id] = (str(peer[0]), int(peer[1]))
        held.set()
        await asyncio.Event().wait()  # cancelled when the client goes (handler_cancellation)
        return response
