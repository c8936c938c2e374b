"""A stored file as an HTTP response, for the API and the console alike: images in place,
anything else as a download that no browser runs (a shared HTML or SVG file must never
become a page of this origin)."""

from __future__ import annotations

from starlette.responses import Response

__all__ = ["INLINE_TYPES", "file_response"]

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
