"""HTML reduced to readable text for the model, with beautifulsoup4 (``http_fetch``; the
knowledge folders' pages, their headings marked as Markdown's so that passages keep their
section)."""

from __future__ import annotations

from bs4 import BeautifulSoup, Tag

__all__ = ["html_to_text"]

_DROPPED = ["script", "style", "noscript", "template"]
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = ["address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl",
           "dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
           "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
           "td", "th", "tr", "ul"]


def html_to_text(html: str, *, headings: bool = False) -> tuple[str | None, str]:
    """``(title, text)`` of a page: scripts, styles, ``noscript`` and ``template`` dropped,
    one line per block element, runs of whitespace collapsed to one space; with
    ``headings``, each ``h1``-``h6`` line begins with as many ``#`` as its level."""
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
        if headings and tag.name in _HEADINGS:
            tag.insert(0, "#" * int(tag.name[1]) + " ")
    return title, _collapse(soup.get_text())


def _collapse(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
