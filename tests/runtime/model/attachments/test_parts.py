"""What a model is shown of a file (runtime/model/attachments/parts.py): an image or a PDF
as itself where the model takes it, else a note or the PDF's text; text framed, cut at
the file's token budget; a file of no readable type, or gone, named."""

from __future__ import annotations

from runtime.model.attachments.inspect import describe_blob
from runtime.model.attachments.parts import (
    DocumentPart,
    ImagePart,
    Seeing,
    TextPart,
    gone_part,
    to_part,
)
from tests.samples import pdf, png

DIGEST = "ab" * 32
ALL = Seeing(images=True, pdfs=True)
NONE = Seeing(images=False, pdfs=False)


def test_an_image_is_shown_to_a_model_that_sees_and_named_to_one_that_does_not() -> None:
    data = png(80, 60)
    ref = describe_blob(data, "shot.png", None, DIGEST, text_tokens=100)
    assert to_part(ref, data, ALL) == ImagePart(ref, data)
    note = to_part(ref, data, NONE)
    assert note == TextPart(ref, f"[image {ref.describe()}: this model cannot see images]",
                            "note")


def test_a_pdf_is_sent_whole_or_as_its_text_page_by_page() -> None:
    data = pdf("Total due: 42 EUR", "Thank you")
    ref = describe_blob(data, "invoice.pdf", None, DIGEST, text_tokens=100)
    assert to_part(ref, data, ALL) == DocumentPart(ref, data)
    text = to_part(ref, data, NONE)
    assert isinstance(text, TextPart) and text.how == "text"
    assert text.text.startswith(f"[file {ref.describe()}, its text]\n--- page 1 ---\n")
    assert "Total due: 42 EUR" in text.text and "--- page 2 ---\nThank you" in text.text
    assert text.text.endswith("\n[end of invoice.pdf]")


def test_a_pdf_without_text_is_a_note_for_a_model_that_cannot_read_pdfs() -> None:
    data = pdf("")
    ref = describe_blob(data, "scan.pdf", None, DIGEST, text_tokens=100)
    note = to_part(ref, data, NONE)
    assert isinstance(note, TextPart) and note.how == "note"
    assert "it has no text to read (scanned pages?)" in note.text


def test_text_is_framed_and_cut_at_the_files_budget() -> None:
    data = ("line\n" * 400).encode()  # 2,000 characters
    ref = describe_blob(data, "log.txt", None, DIGEST, text_tokens=100)  # 400 characters
    part = to_part(ref, data, ALL)
    assert isinstance(part, TextPart) and part.how == "text"
    head, _, rest = part.text.partition("\n")
    assert head == f"[file {ref.describe()}]"
    assert rest.startswith("line\n" * 80)
    assert "\n[... cut here: 400 of 2,000 characters shown]\n[end of log.txt]" in rest
    small = b"a,b\n1,2\n"
    csv = describe_blob(small, "a.csv", None, DIGEST, text_tokens=100)
    assert to_part(csv, small, NONE) == TextPart(
        csv, f"[file {csv.describe()}]\na,b\n1,2\n\n[end of a.csv]")


def test_a_file_no_model_reads_or_no_longer_stored_is_named() -> None:
    data = b"\x00\x01binary"
    ref = describe_blob(data, "blob.bin", None, DIGEST, text_tokens=100)
    assert to_part(ref, data, ALL) == TextPart(
        ref, f"[file {ref.describe()}: not shown, a type the model cannot read]", "note")
    assert gone_part(ref) == TextPart(ref, f"[file {ref.describe()}: no longer stored]",
                                      "note")
