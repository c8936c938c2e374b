"""A stored file as an HTTP response, for the API and the console alike: images in place,
anything else as a download that no browser runs (a shared HTML or SVG file must never
become a page of this origin); and a thread's export, a download of JSON lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

from starlette.responses import Response, StreamingResponse

__all__ = ["INLINE_TYPES", "NDJSON", "export_response", "file_response"]

NDJSON = "application/x-ndjson"

INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Shown in place (the console's thumbnails); anything else is a download: a shared HTML
or SVG file must never run as a page of this origin."""


def file_response(data: bytes, media_type: str, name: str) -> Response:
    """``data`` served so that a browser never runs it: images inline, the rest as an
    ``application/octet-stream`` attachment; no sniffing, no scripts, no framing."""
    inline = media_type in INLINE_TYPES
    safe = "".join(c if c.isalnum() or c in "._- " else "_" for c in name)[:255] or "file"
    return Response(data, media_type=media_type if inline else "application/octet-stream",
                    headers={
                        "Content-Disposition": f'{"inline" if inline else "attachment"}; '
                                               f'filename="{safe}"',
                        "X-Content-Type-Options": "nosniff",
                        "Content-Security-Policy": "default-src 'none'; sandbox",
                        "Cache-Control": "private, max-age=86400, immutable"})


def export_response(lines: AsyncIterator[str], thread_id: str,
                    headers: dict[str, str] | None = None) -> StreamingResponse:
    """A thread's export (``ThreadExport.lines``), streamed as a download named
    ``<thread id>.jsonl`` (the id percent-encoded: it may hold anything)."""
    name = quote(thread_id, safe="")
    return StreamingResponse(lines, media_type=NDJSON, headers={
        **(headers or {}), "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f"attachment; filename=\"thread.jsonl\"; "
                               f"filename*=UTF-8''{name}.jsonl"})
