"""What a thread and a run say about a file: ``FileRef`` (stored, by its content's digest)
and ``FileSource`` (announced by a platform, fetched when the run starts)."""

from __future__ import annotations

import mimetypes
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["IMAGE_TYPES", "BlobInfo", "FileKind", "FileRef", "FileSource", "file_kind",
           "human_size", "media_type_of"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The images both Anthropic's and OpenAI's APIs take."""

_TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/yaml", "application/x-yaml",
    "application/toml", "application/x-ndjson", "application/javascript",
    "application/x-javascript", "application/typescript", "application/x-sh",
    "application/x-python", "application/sql", "application/x-httpd-php",
    "application/csv", "application/x-log",
})
_TEXT_SUFFIXES = frozenset({
    "txt", "md", "markdown", "rst", "csv", "tsv", "json", "jsonl", "ndjson", "log", "yaml",
    "yml", "toml", "ini", "cfg", "conf", "xml", "html", "htm", "css", "py", "js", "ts", "tsx",
    "jsx", "go", "rs", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php", "sh",
    "bash", "zsh", "sql", "swift", "scala", "lua", "pl", "r", "diff", "patch", "env", "tf",
})

FileKind = Literal["image", "pdf", "text", "other"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileRef(_Model):
    """A file a message carries: its bytes are a blob in the store, named by ``digest``
    (sha256, hex), stored once however many messages name it."""

    name: str
    media_type: str
    size: int
    digest: str
    width: int | None = None
    height: int | None = None
    """An image's size in pixels (what it costs a model)."""
    pages: int | None = None
    """A PDF's pages."""
    tokens: int = 0
    """About what it takes of a request (the providers' published estimates; a text file
    is cut to this share of the window when it is sent)."""

    @property
    def kind(self) -> FileKind:
        return file_kind(self.media_type, self.name)

    def describe(self) -> str:
        """``report.pdf (application/pdf, 3 pages, 120 KB)``: a line for notes and logs."""
        extra = [self.media_type]
        if self.width and self.height:
            extra.append(f"{self.width}x{self.height}")
        if self.pages:
            extra.append(f"{self.pages} page{'s' if self.pages != 1 else ''}")
        extra.append(human_size(self.size))
        return f"{self.name} ({', '.join(extra)})"


class FileSource(_Model):
    """A file a platform announced with a message: fetched by the channel ``via`` names as
    the run's first step, then stored (and named by a ``FileRef``)."""

    via: str
    """The channel whose fetcher downloads it (``slack``, ``discord``)."""
    url: str
    name: str
    media_type: str = "application/octet-stream"
    """What the platform says it is (checked against the bytes when they arrive)."""
    size: int | None = None
    """What the platform says its size is (a limit is checked before downloading)."""
    id: str | None = None
    """The platform's id of the file."""


class BlobInfo(_Model):
    """What the store knows of a blob besides its bytes."""

    digest: str
    size: int
    media_type: str
    created_at: float = Field(default_factory=time.time)


def media_type_of(claimed: str | None, name: str) -> str:
    """The media type to go by: the one claimed (without parameters), else the name's."""
    media = (claimed or "").split(";", 1)[0].strip().lower()
    if media and media != "application/octet-stream":
        return media
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def file_kind(media_type: str, name: str = "") -> FileKind:
    """How a model is shown a file of this type: as an image, a PDF, text, or described."""
    if media_type in IMAGE_TYPES:
        return "image"
    if media_type == "application/pdf":
        return "pdf"
    if media_type.startswith("text/") or media_type in _TEXT_TYPES \
            or media_type.endswith(("+json", "+xml")):
        return "text"
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix in _TEXT_SUFFIXES and not media_type.startswith(("image/", "audio/", "video/")):
        return "text"
    return "other"


def human_size(size: int) -> str:
    """``1.2 MB``, ``340 KB``, ``12 bytes``."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{size // 1_000} KB"
    return f"{size} byte{'s' if size != 1 else ''}"
