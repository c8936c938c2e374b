"""The fake Slack's files: what people share, served at ``url_private_download`` to the
bot token only (without it, Slack's answer is its sign-in page, an HTML page with status
200, which is what a client that does not check would save as the file). A download can be
held half-way (``hold``): a process killed or stopped in the middle of one."""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from .store import JSON, SlackError

__all__ = ["SIGN_IN_PAGE", "SharedFiles", "Uploads"]

SIGN_IN_PAGE = (b"<!DOCTYPE html><html lang=\"en-US\"><head><title>Slack</title></head><body>"
                b"<h1>Sign in to Maiden Test</h1><form action=\"/signin\"></form></body></html>")


@dataclass
class _File:
    id: str
    name: str
    mimetype: str
    data: bytes
    object: JSON = field(default_factory=dict)
    """The file object as Slack shows it (``shares`` aside)."""


@dataclass
class SharedFiles:
    """Files by id, and every download asked for: ``(file id, with the bot token)``."""

    team: str
    bot_token: str
    files: dict[str, _File] = field(default_factory=dict)
    downloads: list[tuple[str, bool]] = field(default_factory=list)
    without_files_read: bool = False
    """The app was installed without ``files:read``: every download is the sign-in page."""
    signed_out: set[str] = field(default_factory=set)
    """File ids whose downloads are the sign-in page even with the bot token: a file the
    token may not read (one shared from another workspace over Slack Connect, say)."""
    held: dict[str, asyncio.Event] = field(default_factory=dict)
    """File id -> set once its held download has sent half the file (``hold``)."""
    held_from: dict[str, tuple[str, int]] = field(default_factory=dict)
    """File id -> the client address (host, port) its held download went to."""

    def hold(self, file_id: str) -> asyncio.Event:
        """The next download of ``file_id`` sends its headers and half the file, then waits
        until the client goes away (or the fake stops): a download under way. The event
        returned is set once the half is sent."""
        self.held[file_id] = asyncio.Event()
        return self.held[file_id]

    def add(self, base_url: str, user: str, name: str, data: bytes, mimetype: str, *,
            file_id: str | None = None, title: str | None = None) -> JSON:
        """Store a file and return its object as a message event carries it."""
        file_id = file_id or "F" + secrets.token_hex(5).upper()
        url = f"{base_url}/files-pri/{self.team}-{file_id}/{name}"
        obj: JSON = {"id": file_id, "created": 1700000000, "timestamp": 1700000000, "name": name,
                "title": title or name, "mimetype": mimetype, "filetype": name.rsplit(".", 1)[-1],
                "pretty_type": mimetype, "user": user, "user_team": self.team,
                "editable": False, "size": len(data), "mode": "hosted", "is_external": False,
                "external_type": "", "is_public": False, "public_url_shared": False,
                "display_as_bot": False, "username": "", "url_private": url,
                "url_private_download": url.replace(f"/{name}", f"/download/{name}"),
                "permalink": f"https://maiden-test.slack.com/files/{user}/{file_id}/{name}",
                "file_access": "visible"}
        self.files[file_id] = _File(file_id, name, mimetype, data, obj)
        return dict(obj)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """``GET /files-pri/{team}-{id}/download/{name}``."""
        file_id = request.match_info["file"].split("-", 1)[-1]
        authorized = request.headers.get("Authorization") == f"Bearer {self.bot_token}"
        self.downloads.append((file_id, authorized))
        found = self.files.get(file_id)
        if not authorized or self.without_files_read or file_id in self.signed_out:
            return web.Response(body=SIGN_IN_PAGE, content_type="text/html", charset="utf-8")
        if found is None:
            return web.Response(status=404, text="file_not_found")
        held = self.held.pop(file_id, None)
        if held is None:
            return web.Response(body=found.data, content_type=found.mimetype)
        response = web.StreamResponse(headers={"Content-Type": found.mimetype})
        response.content_length = len(found.data)
        await response.prepare(request)
        await response.write(found.data[:len(found.data) // 2])
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer:
            self.held_from[file_id] = (str(peer[0]), int(peer[1]))
        held.set()
        await asyncio.Event().wait()  # cancelled when the client goes (handler_cancellation)
        return response


@dataclass
class Uploads:
    """The bot's uploads, in Slack's three steps: ``files.getUploadURLExternal`` (an id and a
    URL), the bytes POSTed to that URL, ``files.completeUploadExternal`` (the file shared
    into a channel or thread as a message by the bot); and ``files.info`` on any file.
    ``uploaded``: the bytes of every completed upload, by file id.

    From the reference (docs.slack.dev/reference/methods/...):
    ``files.completeUploadExternal`` "can only be called once"; after that, as for an id
    it never issued, it answers ``file_not_found`` ("Could not find the file from the upload
    ticket"). An upload never completed is discarded: it is no file, so ``files.info``
    answers ``file_not_found`` for it (the reference does not say; the stricter reading).
    ``files.info`` requires ``file``, answers ``file_not_found`` / ``file_deleted``, and
    gives the file object with its ``shares``: ``{"public" | "private": {channel: [{"ts",
    "thread_ts" (in a thread), ...}]}}`` (public for ``C…`` channels, private for the
    rest). Shares are recorded for the bot's uploads; a person's shared file shows none.
    """

    shared: SharedFiles
    bot_user: str
    base_url: Callable[[], str]
    post: Callable[[str, JSON, str | None], JSON]
    """``(channel, fields, thread_ts)`` -> the stored message (the bot's)."""
    pending: dict[str, JSON] = field(default_factory=dict)
    """Upload tickets handed out and not completed, by file id (``discard`` one: Slack
    dropped it, as it does with one left uncompleted)."""
    uploaded: dict[str, bytes] = field(default_factory=dict)
    shares: dict[str, JSON] = field(default_factory=dict)
    """File id -> its ``shares``."""
    deleted: set[str] = field(default_factory=set)

    def get_url(self, params: JSON) -> JSON:
        name, length = params.get("filename"), params.get("length")
        if not name or not str(length or "").isdigit():
            raise SlackError("invalid_arguments")
        file_id = "F" + secrets.token_hex(5).upper()
        self.pending[file_id] = {"filename": str(name), "length": int(str(length))}
        return {"upload_url": f"{self.base_url()}/upload/v1/{file_id}", "file_id": file_id}

    async def receive(self, request: web.Request) -> web.StreamResponse:
        """``POST /upload/v1/{id}``: the bytes (raw, or a multipart ``file`` part)."""
        upload = self.pending.get(request.match_info["id"])
        if upload is None:
            return web.Response(status=404, text="upload_not_found")
        if request.content_type == "multipart/form-data":
            part = (await request.post()).get("file")
            data = part.file.read() if isinstance(part, web.FileField) else b""
        else:
            data = await request.read()
        upload["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def complete(self, params: JSON) -> JSON:
        items = params.get("files")
        if isinstance(items, str):
            items = json.loads(items)
        if not isinstance(items, list) or not items:
            raise SlackError("invalid_arguments")
        shared = []
        for item in items:
            upload = self.pending.pop(str(item.get("id")), None)
            if upload is None or "data" not in upload:
                raise SlackError("file_not_found")
            data, name = upload["data"], upload["filename"]
            if len(data) != upload["length"]:
                raise SlackError("file_upload_size_mismatch")
            obj = self.shared.add(self.base_url(), self.bot_user, name, data, _type_of(name),
                                  file_id=str(item["id"]), title=item.get("title"))
            self.uploaded[obj["id"]] = data
            self.shares[obj["id"]] = {}
            shared.append(obj)
        channel = params.get("channel_id")
        if channel:
            message = self.post(str(channel), {"text": str(params.get("initial_comment") or ""),
                                               "files": shared, "upload": True},
                                str(params.get("thread_ts") or "") or None)
            share: JSON = {"ts": message["ts"], "share_user_id": self.bot_user}
            if message.get("thread_ts"):
                share["thread_ts"] = message["thread_ts"]
            kind = "public" if str(channel).startswith("C") else "private"
            for obj in shared:
                self.shares[obj["id"]].setdefault(kind, {}).setdefault(str(channel), []) \
                    .append(dict(share))
        return {"files": [{"id": f["id"], "title": f["title"]} for f in shared]}

    def info(self, params: JSON) -> JSON:
        """``files.info``: the file object with its shares."""
        file_id = str(params.get("file") or "")
        if not file_id:
            raise SlackError("invalid_arguments", response_metadata={
                "messages": ["[ERROR] missing required field: file"]})
        if file_id in self.deleted:
            raise SlackError("file_deleted")
        found = self.shared.files.get(file_id)
        if found is None:  # never made, or a ticket not completed
            raise SlackError("file_not_found")
        shares = self.shares.get(file_id, {})
        public, private = list(shares.get("public", {})), list(shares.get("private", {}))
        return {"file": {**found.object, "shares": copy.deepcopy(shares), "channels": public,
                         "groups": [c for c in private if c.startswith("G")],
                         "ims": [c for c in private if c.startswith("D")]},
                "comments": [], "response_metadata": {"next_cursor": ""}}

    def delete(self, file_id: str) -> None:
        """A person deletes the file (its message keeps a tombstone in Slack)."""
        self.shared.files.pop(file_id)
        self.deleted.add(file_id)

    def discard(self, file_id: str) -> None:
        """Slack drops an upload ticket never completed (it expired)."""
        del self.pending[file_id]


def _type_of(name: str) -> str:
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"
