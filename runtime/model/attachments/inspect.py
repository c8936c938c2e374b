"""What a blob is: its media type checked against its bytes, an image's size, a PDF's pages,
and what it costs a model (the providers' published estimates). Pure, no I/O."""

from __future__ import annotations

import io
import math

from .refs import IMAGE_TYPES, FileRef, media_type_of

__all__ = ["OTHER_TOKENS", "PDF_PAGE_TOKENS", "describe_blob", "image_tokens", "looks_like_html"]

PDF_PAGE_TOKENS = 2_000
"""Anthropic's estimate for a PDF page is 1,500 to 3,000 tokens (its text and an image of
the page); OpenAI's ``file`` parts cost about as much."""
OTHER_TOKENS = 40
"""A file shown by name, type and size."""
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def describe_blob(data: bytes, name: str, claimed: str | None, digest: str, *,
                  text_tokens: int) -> FileRef:
    """The reference to ``data``: its media type as the bytes bear out (an image or a PDF
    that does not open is not sent as one: a model API would refuse the whole request),
    its pixels or pages, and its tokens (a text file's capped at ``text_tokens``)."""
    media = media_type_of(claimed, name)
    width = height = pages = None
    if media in IMAGE_TYPES or _magic_image(data):
        found = _image(data)
        if found is None:
            media = "application/octet-stream" if media in IMAGE_TYPES else media
        else:
            media, width, height = found
    elif media == "application/pdf" or data.startswith(b"%PDF-"):
        pages = _pdf_pages(data)
        media = "application/pdf" if pages is not None else "application/octet-stream"
    if media == "application/octet-stream" and _is_text(data):
        media = "text/plain"
    ref = FileRef(name=name, media_type=media, size=len(data), digest=digest, width=width,
                  height=height, pages=pages)
    return ref.model_copy(update={"tokens": _tokens(ref, text_tokens)})


def _tokens(ref: FileRef, text_tokens: int) -> int:
    kind = ref.kind
    if kind == "image":
        return image_tokens(ref.width or 1568, ref.height or 1568)
    if kind == "pdf":
        return PDF_PAGE_TOKENS * max(1, ref.pages or 1)
    if kind == "text":
        return max(1, min(ref.size // 4 + 1, text_tokens))
    return OTHER_TOKENS


def image_tokens(width: int, height: int) -> int:
    """The larger of the two vendors' published costs of an image: Anthropic's
    ``width * height / 750`` after scaling to 1,568 pixels on the long side (and about
    1.15 megapixels), and OpenAI's 85 + 170 per 512-pixel tile at high detail (after
    fitting in 2,048 square and scaling the short side to 768)."""
    w, h = float(width), float(height)
    scale = min(1.0, 1568 / max(w, h), math.sqrt(1_150_000 / (w * h)))
    anthropic = math.ceil(w * scale * h * scale / 750)
    scale = min(1.0, 2048 / max(w, h))
    ow, oh = w * scale, h * scale
    scale = min(1.0, 768 / min(ow, oh))
    ow, oh = ow * scale, oh * scale
    openai = 85 + 170 * math.ceil(ow / 512) * math.ceil(oh / 512)
    return max(anthropic, openai)


def looks_like_html(data: bytes) -> bool:
    """A web page (a sign-in page served instead of a file)."""
    head = data[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _magic_image(data: bytes) -> bool:
    return data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) \
        or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")


def _image(data: bytes) -> tuple[str, int, int] | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            media = _FORMATS.get(image.format or "")
            if media is None:
                return None
            image.verify()
            width, height = image.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError,
            Image.DecompressionBombError):
        return None
    return media, width, height


def _pdf_pages(data: bytes) -> int | None:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        return len(PdfReader(io.BytesIO(data)).pages)
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        return None


def _is_text(data: bytes) -> bool:
    head = data[:8192]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a character cut at the sample's end
    return True
