"""The fake Discord's CDN: attachments people post, served at signed, expiring URLs as
``cdn.discordapp.com`` serves them (``?ex=&is=&hm=``; a bad or missing signature is a 404
with Discord's words), with no token asked for."""

from __future__ import annotations

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
        return web.Response(body=data, content_type=content_type)
