"""HTML to text (runtime/builtins/html_text.py), by a table: the title, and the text a
reader sees, its whitespace collapsed."""

from __future__ import annotations

import pytest

from runtime.model.html_text import html_to_text
from tests.samples import PAGE, PAGE_TEXT


@pytest.mark.parametrize(("html", "title", "text"), [
    (PAGE.decode(), "The Example Page", PAGE_TEXT),
    ("<p>no title</p>", None, "no title"),
    ("<title>   </title><p>x</p>", None, "x"),
    ("just   words,\n\n  no markup", None, "just words,\nno markup"),
    ("http://only-a-url.example/", None, "http://only-a-url.example/"),
    ("<p>caf&eacute; &lt;tag&gt;</p>", None, "café <tag>"),
    ("<pre>  a\n  b</pre><td>c</td><td>d</td>", None, "a\nb\nc\nd"),
    ("<p>a<span>b</span>c</p>", None, "abc"),
])
def test_html_to_text(html: str, title: str | None, text: str) -> None:
    assert html_to_text(html) == (title, text)
