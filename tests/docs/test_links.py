"""The README stays a README, and no relative link of it or of the docs site leads nowhere.

`mkdocs build --strict` (.ci/run) checks the links between the site's pages, not the
README's (it is not a page of the site), nor a page's links to the repository's files
outside docs/."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def slug(heading: str) -> str:
    """A heading's id, as MkDocs' `toc` makes it (Python-Markdown's default ``slugify``)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def links(text: str) -> list[str]:
    """The target of every inline link and image, outside code."""
    text = CODE.sub("code", FENCE.sub("", text))
    return LINK.findall(text)


def anchors(page: Path) -> set[str]:
    """The ids of a page's headings, as MkDocs makes them (its own `{#id}` if it has one)."""
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        own = re.search(r"\{[^}]*#([\w-]+)[^}]*\}\s*$", heading)
        if own:
            found.add(own.group(1))
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
        found.add(slug(text))
    return found


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("#")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def test_the_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 220, f"README.md has {lines} lines: what it explains belongs in docs/"


def test_every_relative_link_leads_to_a_file() -> None:
    broken = []
    for page in pages():
        for target in links(page.read_text(encoding="utf-8")):
            if not relative(target):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_the_readmes_links_into_the_site_name_headings_that_exist() -> None:
    """The site's build checks its own anchors; the README's into it only this test does."""
    broken = []
    for target in links(README.read_text(encoding="utf-8")):
        if not relative(target) or "#" not in target:
            continue
        file, anchor = target.split("#", 1)
        page = (ROOT / file).resolve()
        if page.suffix == ".md" and page.exists() and anchor not in anchors(page):
            broken.append(target)
    assert not broken, "README links to headings that are not there: " + ", ".join(broken)


def test_the_link_finder_finds_links() -> None:
    """What the tests above rely on: links in text found, links in code not."""
    text = ("[a](x.md) ![b](img/y.png \"t\") [`c` d](../z.md#h) [e\nf](g.md)\n"
            "`[no](code.md)`\n```\n[no](fenced.md)\n```\n    ```json\n    [no](tab.md)\n    ```\n")
    assert links(text) == ["x.md", "img/y.png", "../z.md#h", "g.md"]
    assert not relative("https://example.com") and not relative("#here")
    assert relative("../guides/x.md#y")
    assert slug("Serve it: `maiden run`".replace("`", "")) == "serve-it-maiden-run"
    assert slug('What "exactly once" means here') == "what-exactly-once-means-here"
