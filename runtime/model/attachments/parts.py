"""A stored file as a model is shown it: an image, a PDF document, or text (a text file's
content, a PDF's text, or a line describing it). Which one depends on what the provider
takes (``Seeing``); the providers turn each part into their wire format."""

from __future__ import annotations

import io
from dataclasses import dataclass

from .refs import FileRef

__all__ = ["DocumentPart", "FilePart", "ImagePart", "Seeing", "TextPart", "gone_part", "pdf_pages",
           "to_part"]


@dataclass(frozen=True, slots=True)
class Seeing:
    """What a provider's model takes besides text."""

    images: bool = False
    pdfs: bool = False


@dataclass(frozen=True, slots=True)
class ImagePart:
    ref: FileRef
    data: bytes


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A PDF, for a provider that reads PDFs itself."""

    ref: FileRef
    data: bytes


@dataclass(frozen=True, slots=True)
class TextPart:
    ref: FileRef
    text: str
    how: str = "text"
    """``text`` (its content), or ``note`` (a line about it instead)."""


FilePart = ImagePart | DocumentPart | TextPart


def to_part(ref: FileRef, data: bytes, seeing: Seeing) -> FilePart:
    """``ref``'s bytes as the model is to see them."""
    kind = ref.kind
    if kind == "image":
        if seeing.images:
            return ImagePart(ref, data)
        return TextPart(ref, f"[image {ref.describe()}: this model cannot see images]", "note")
    if kind == "pdf":
        if seeing.pdfs:
            return DocumentPart(ref, data)
        text = _pdf_text(data)
        if not text.strip():
            return TextPart(ref, f"[PDF {ref.describe()}: it has no text to read (scanned "
                                 "pages?), and this model cannot read PDFs]", "note")
        return TextPart(ref, _framed(ref, text, "its text"))
    if kind == "text":
        return TextPart(ref, _framed(ref, data.decode("utf-8", errors="replace"), ""))
    return TextPart(ref, f"[file {ref.describe()}: not shown, a type the model cannot "
                         "read]", "note")


def gone_part(ref: FileRef) -> TextPart:
    """For a file whose blob is no longer in the store (pruned)."""
    return TextPart(ref, f"[file {ref.describe()}: no longer stored]", "note")


def _framed(ref: FileRef, text: str, what: str) -> str:
    limit = max(200, ref.tokens * 4)
    shown = text if len(text) <= limit else (
        text[:limit] + f"\n[... cut here: {limit:,} of {len(text):,} characters shown]")
    label = f"{ref.describe()}{', ' + what if what else ''}"
    return f"[file {label}]\n{shown}\n[end of {ref.name}]"


def pdf_pages(data: bytes) -> list[str]:
    """The text of each page of a PDF (pypdf's), none if it cannot be read."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        return [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):
        return []


def _pdf_text(data: bytes) -> str:
    pages = pdf_pages(data)
    if len(pages) == 1:
        return pages[0]
    return "\n".join(f"--- page {n} ---\n{text}" for n, text in enumerate(pages, 1))
