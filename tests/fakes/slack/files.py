"""The fake Slack's files: what people share, served at ``url_private_download`` to the
bot token only (without it, Slack's answer is its sign-in page, an HTML page with status
200, which is what a client that does not check would save as the file)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from aiohttp import web

from .store import JSON

__all__ = ["SIGN_IN_PAGE", "SharedFiles"]

SIGN_IN_PAGE = (b"<!DOCTYPE html><html lang=\"en-US\"><head><title>Slack</title></head><body>"
                b"<h1>Sign in to Maiden Test</h1><form action=\"/signin\"></form></body></html>")


@dataclass
class _File:
    id: str
    name: str
    mimetype: str
    data: bytes


@dataclass
class SharedFiles:
    """Files by id, and every download asked for: ``(file id, with the bot token)``."""

    team: str
    bot_token: str
    files: dict[str, _File] = field(default_factory=dict)
    downloads: list[tuple[str, bool]] = field(default_factory=list)
    without_files_read: bool = False
    """The app was installed without ``files:read``: every download is the sign-in page."""

    def add(self, base_url: str, user: str, name: str, data: bytes, mimetype: str) -> JSON:
        """Store a file and return its object as a message event carries it."""
        file_id = "F" + secrets.token_hex(5).upper()
        self.files[file_id] = _File(file_id, name, mimetype, data)
        url = f"{base_url}/files-pri/{self.team}-{file_id}/{name}"
        return {"id": file_id, "created": 1700000000, "timestamp": 1700000000, "name": name,
                "title": name, "mimetype": mimetype, "filetype": name.rsplit(".", 1)[-1],
                "pretty_type": mimetype, "user": user, "user_team": self.team,
                "editable": False, "size": len(data), "mode": "hosted", "is_external": False,
                "external_type": "", "is_public": False, "public_url_shared": False,
                "display_as_bot": False, "username": "", "url_private": url,
                "url_private_download": url.replace(f"/{name}", f"/download/{name}"),
                "permalink": f"https://maiden-test.slack.com/files/{user}/{file_id}/{name}",
                "file_access": "visible"}

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """``GET /files-pri/{team}-{id}/download/{name}``."""
        file_id = request.match_info["file"].split("-", 1)[-1]
        authorized = request.headers.get("Authorization") == f"Bearer {self.bot_token}"
        self.downloads.append((file_id, authorized))
        found = self.files.get(file_id)
        if not authorized or self.without_files_read:
            return web.Response(body=SIGN_IN_PAGE, content_type="text/html", charset="utf-8")
        if found is None:
            return web.Response(status=404, text="file_not_found")
        return web.Response(body=found.data, content_type=found.mimetype)
