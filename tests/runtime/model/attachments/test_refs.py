"""File references (runtime/model/attachments/refs.py), by tables: the media type to go by,
how a model is shown a file of each type, and the line that describes one."""

from __future__ import annotations

import pytest

from runtime.model.attachments.refs import FileRef, file_kind, human_size, media_type_of


@pytest.mark.parametrize(("claimed", "name", "media"), [
    ("text/csv; charset=utf-8", "x.bin", "text/csv"),
    ("Image/PNG", "x", "image/png"),
    (None, "report.pdf", "application/pdf"),
    ("", "notes.md", "text/markdown"),
    ("application/octet-stream", "shot.png", "image/png"),  # says nothing: the name does
    (None, "no-suffix", "application/octet-stream"),
])
def test_media_type_of(claimed: str | None, name: str, media: str) -> None:
    assert media_type_of(claimed, name) == media


@pytest.mark.parametrize(("media", "name", "kind"), [
    ("image/png", "", "image"), ("image/webp", "", "image"),
    ("image/tiff", "scan.tiff", "other"),  # no model API takes it
    ("application/pdf", "", "pdf"),
    ("text/plain", "", "text"), ("application/json", "", "text"),
    ("application/vnd.api+json", "", "text"), ("image/svg+xml", "", "text"),
    ("application/octet-stream", "main.py", "text"), ("application/octet-stream", "A.SQL", "text"),
    ("application/zip", "code.zip", "other"),
    ("video/mp4", "clip.ts", "other"),  # a media type wins over a code-like suffix
    ("application/octet-stream", "", "other"),
])
def test_file_kind(media: str, name: str, kind: str) -> None:
    assert file_kind(media, name) == kind


@pytest.mark.parametrize(("size", "told"), [
    (0, "0 bytes"), (1, "1 byte"), (999, "999 bytes"), (1_000, "1 KB"), (340_999, "340 KB"),
    (1_000_000, "1.0 MB"), (1_250_000, "1.2 MB"),
])
def test_human_size(size: int, told: str) -> None:
    assert human_size(size) == told


@pytest.mark.parametrize(("fields", "line"), [
    ({"name": "report.pdf", "media_type": "application/pdf", "size": 120_000, "pages": 3},
     "report.pdf (application/pdf, 3 pages, 120 KB)"),
    ({"name": "one.pdf", "media_type": "application/pdf", "size": 10, "pages": 1},
     "one.pdf (application/pdf, 1 page, 10 bytes)"),
    ({"name": "shot.png", "media_type": "image/png", "size": 2_500_000, "width": 800,
      "height": 600}, "shot.png (image/png, 800x600, 2.5 MB)"),
    ({"name": "a.csv", "media_type": "text/csv", "size": 8}, "a.csv (text/csv, 8 bytes)"),
])
def test_a_file_is_described_in_one_line(fields: dict[str, object], line: str) -> None:
    ref = FileRef.model_validate({"digest": "ab" * 32, **fields})
    assert ref.describe() == line
    assert ref.kind == file_kind(ref.media_type, ref.name)
