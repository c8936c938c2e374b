"""Files to share in tests, made here: real PNGs (Pillow) and PDFs with text that pypdf
reads back; a web page and the text read from it."""

from __future__ import annotations

import io

from PIL import Image

from runtime import ToolFile, tool

__all__ = ["PAGE", "PAGE_TEXT", "REPORT", "export", "pdf", "png"]

REPORT = ToolFile("report.csv", "text/csv", b"a,b\n1,2\n")

PAGE = b"""<!doctype html>
<html><head><title>  The   Example
  Page </title>
<style>body { color: red }</style><script>var secret = "do not show";</script></head>
<body><h1>Welcome</h1><p>Hello,   <b>reader</b> &amp; friends.</p>
<noscript>enable javascript</noscript><template><p>hidden template</p></template>
<ul><li>one</li><li>two</li></ul><!-- a comment --><div>last<br>line</div></body></html>"""
"""A page with what a reader does not see: a style, a script, a template, a comment."""
PAGE_TEXT = "Welcome\nHello, reader & friends.\none\ntwo\nlast\nline"
"""The text ``html_to_text`` reads from ``PAGE`` (its title: "The Example Page")."""


@tool
def export() -> ToolFile:
    """Export the report."""
    return REPORT


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A PNG of one colour (a different ``color`` makes different bytes)."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def pdf(*pages: str) -> bytes:
    """A PDF of one line of text per page, its cross-reference table exact."""
    count = len(pages)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b" ".join(
                   f"{4 + 2 * i} 0 R".encode() for i in range(count))
               + f"] /Count {count} >>".encode(),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       f"<< /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream
                       + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n" \
        .encode()
    return bytes(out)
