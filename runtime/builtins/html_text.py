"""HTML reduced to readable text for the model, with beautifulsoup4 (``http_fetch``)."""

from __future__ import annotations

from bs4 import BeautifulSoup, Tag

__all__ = ["html_to_text"]

_DROPPED = ["script", "style", "noscript", "template"]
_BLOCKS = ["address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl",
           "dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
           "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
           "td", "th", "tr", "ul"]


def html_to_text(html: str) -> tuple[str | None, str]:
    """``(title, text)`` of a page: scripts, styles, ``noscript`` and ``template`` dropped,
    one line per block element, runs of whitespace collapsed to one space."""
    if "<" not in html:
        return None, _collapse(html)
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(_DROPPED):
        tag.decompose()
    title = None
    found = soup.find("title")
    if isinstance(found, Tag):
        title = " ".join(found.get_text().split()) or None
        found.decompose()
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    return title, _collapse(soup.get_text())


def _collapse(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
