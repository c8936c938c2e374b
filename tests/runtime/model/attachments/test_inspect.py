"""What a blob is (runtime/model/attachments/inspect.py): its media type as its bytes bear
out, an image's size, a PDF's pages, and what it costs a model."""

from __future__ import annotations

import pytest

from runtime.model.attachments.inspect import (
    OTHER_TOKENS,
    PDF_PAGE_TOKENS,
    describe_blob,
    image_tokens,
    looks_like_html,
)
from tests.samples import pdf, png

DIGEST = "ab" * 32


def test_an_image_is_measured_whatever_it_was_called() -> None:
    for claimed, name in (("image/png", "shot.png"), (None, "shot"),
                          ("application/octet-stream", "shot.bin")):
        ref = describe_blob(png(800, 600), name, claimed, DIGEST, text_tokens=100)
        assert (ref.media_type, ref.width, ref.height) == ("image/png", 800, 600)
        assert ref.tokens == image_tokens(800, 600) and ref.kind == "image"
        assert (ref.name, ref.digest, ref.size) == (name, DIGEST, len(png(800, 600)))


def test_an_image_that_does_not_open_is_not_sent_as_one() -> None:
    broken = png()[:40]  # its header, cut short
    ref = describe_blob(broken, "shot.png", "image/png", DIGEST, text_tokens=100)
    assert ref.media_type == "application/octet-stream" and ref.width is None
    assert ref.tokens == OTHER_TOKENS


def test_a_pdf_is_counted_by_its_pages() -> None:
    ref = describe_blob(pdf("one", "two", "three"), "brief", None, DIGEST, text_tokens=100)
    assert (ref.media_type, ref.pages, ref.tokens) == ("application/pdf", 3,
                                                      3 * PDF_PAGE_TOKENS)
    fake = describe_blob(b"%PDF-1.4 but nothing else", "fake.pdf", "application/pdf", DIGEST,
                         text_tokens=100)
    assert fake.media_type == "text/plain" and fake.pages is None  # readable, so text


@pytest.mark.parametrize(("data", "claimed", "media", "tokens"), [
    (b"a,b\n1,2\n", "text/csv", "text/csv", 3),
    (b"x" * 4_000, None, "text/plain", 100),  # capped at text_tokens
    # Read from its first 8,192 bytes, which end in the middle of a character.
    (b"a" + "é".encode() * 4_096, None, "text/plain", 100),
    (b"\x00\x01\x02binary", None, "application/octet-stream", OTHER_TOKENS),
    (b"\xff\xfe\xfd not utf-8 at the start", None, "application/octet-stream", OTHER_TOKENS),
])
def test_text_and_other_files(data: bytes, claimed: str | None, media: str,
                              tokens: int) -> None:
    ref = describe_blob(data, "blob", claimed, DIGEST, text_tokens=100)
    assert (ref.media_type, ref.tokens) == (media, tokens)


@pytest.mark.parametrize(("width", "height", "tokens"), [
    (200, 200, 255),  # OpenAI's one tile (85 + 170) is more than Anthropic's 54
    (1000, 1000, 1334),  # Anthropic's 1,334 is more than OpenAI's four tiles (765)
    (4000, 100, 765),  # OpenAI fits it in 2,048 first: four tiles, not eight
])
def test_image_tokens_are_the_larger_of_the_vendors_estimates(width: int, height: int,
                                                              tokens: int) -> None:
    assert image_tokens(width, height) == tokens


@pytest.mark.parametrize(("data", "html"), [
    (b"<!DOCTYPE html><html>", True), (b"\n  <html lang=en>", True), (b"<HEAD>", True),
    (b"<body>", True), (b"%PDF-1.4", False), (b"plain <html> later", False), (b"", False),
])
def test_a_sign_in_page_looks_like_html(data: bytes, html: bool) -> None:
    assert looks_like_html(data) is html
