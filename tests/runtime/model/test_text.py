"""split_message (``runtime/model/text.py``): tables of cuts, and a property over
generated Markdown.

The property is checked against the original text by a matcher that knows
only the documented contract (it does not reuse the splitter's internals):
every part, minus the fence lines the splitter may add, is the next piece of
the original, with nothing but whitespace between pieces.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache

import pytest

from runtime.model.text import MIN_LIMIT, split_message

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_CLOSER = re.compile(r"(`{3,}|~{3,})")


@dataclass(frozen=True)
class Block:
    opener: str
    fence: str
    open_end: int
    close_start: int


def blocks(text: str) -> list[Block]:
    """Fenced blocks by CommonMark's rule, line by line (unclosed: to the end)."""
    found: list[Block] = []
    current: tuple[str, str, int] | None = None
    offset = 0
    for raw in text.split("\n"):
        start, offset = offset, offset + len(raw) + 1
        line = raw.removesuffix("\r")
        m = _FENCE.fullmatch(line)
        if current is None:
            if m and not (m[1][0] == "`" and "`" in m[2]):
                current = (line, m[1], start + len(raw))
        elif m and m[1][0] == current[1][0] and len(m[1]) >= len(current[1]) and not m[2].strip():
            found.append(Block(current[0], current[1], current[2], start))
            current = None
    if current is not None:
        found.append(Block(current[0], current[1], current[2], len(text)))
    return found


def ends_open(part: str) -> bool:
    """Whether a part, posted alone, ends inside a code block."""
    found = blocks(part)
    return bool(found) and found[-1].close_start == len(part)


def explain(text: str, parts: list[str], limit: int) -> bool:
    """Whether ``parts`` are ``text`` in order, cut only at whitespace, with added fence lines
    exactly where a cut falls inside a block short enough to re-open."""
    found = blocks(text)

    def open_at(end: int) -> Block | None:
        return next((b for b in found if b.open_end <= end <= b.close_start), None)

    @cache
    def match(i: int, at: int, reopen: str | None) -> bool:
        if i == len(parts):
            return reopen is None and not text[at:].strip()
        part = parts[i]
        if reopen is not None:
            if not part.startswith(reopen + "\n"):
                return False
            part = part[len(reopen) + 1:]
        options: list[tuple[str, str | None]] = [(part, None)]
        head, _, tail = part.rpartition("\n")
        if _CLOSER.fullmatch(tail):
            options.append((head, tail))
        gap_end = len(text) - len(text[at:].lstrip())
        for core, closer in options:
            for start in range(at, gap_end + 1):
                if not text.startswith(core, start):
                    continue
                end = start + len(core)
                block = open_at(end)
                if closer is None:
                    must_close = (block is not None and i < len(parts) - 1
                                  and 4 * (len(block.opener) + 1) <= limit)
                    if not must_close and match(i + 1, end, None):
                        return True
                elif block is not None and block.fence == closer and match(
                        i + 1, end, block.opener):
                    return True
        return False

    return match(0, 0, None)


def check(text: str, limit: int) -> list[str]:
    """Split, then assert every documented guarantee; returns the parts."""
    parts = split_message(text, limit)
    assert parts == split_message(text, limit)
    if len(text) <= limit:
        assert parts == [text]
        return parts
    for part in parts:
        assert 0 < len(part) <= limit and part.strip(), (limit, part)
    assert explain(text, parts, limit), (text, limit, parts)
    kept = all(4 * (len(b.opener) + 1) <= limit for b in blocks(text))
    if kept:  # every part renders its code as code: no block left open but the text's own
        assert not any(ends_open(p) for p in parts[:-1]), parts
    return parts


# --- tables -------------------------------------------------------------------------------

URL = "https://example.com/" + "a" * 60
CUTS: list[tuple[str, str, int, list[str]]] = [
    ("short", "hello", 40, ["hello"]),
    ("empty", "", 40, [""]),
    ("short whitespace", "   \n  ", 40, ["   \n  "]),
    ("exact limit", "x" * 40, 40, ["x" * 40]),
    ("one over", "x" * 41, 40, ["x" * 40, "x"]),
    ("paragraph beats a later line break",
     "Para one is here, long.\n\nLine two\nline three continues on", 40,
     ["Para one is here, long.", "Line two\nline three continues on"]),
    ("line", "The first line is long enough\nand a second line that runs on", 40,
     ["The first line is long enough", "and a second line that runs on"]),
    ("blank line too early: a space past half wins",
     "Hi.\n\nThis is a much longer second paragraph that goes on.", 40,
     ["Hi.\n\nThis is a much longer second", "paragraph that goes on."]),
    ("word", "lorem ipsum dolor sit amet consectetur adipiscing elit sed do", 40,
     ["lorem ipsum dolor sit amet consectetur", "adipiscing elit sed do"]),
    ("run of spaces dropped at the cut", "lorem ipsum dolor sit amet consectetur    adipiscing", 40,
     ["lorem ipsum dolor sit amet consectetur", "adipiscing"]),
    ("hard cut of a long word", "a" * 100, 40, ["a" * 40, "a" * 40, "a" * 20]),
    ("URL: a short part beats breaking it earlier", "see " + URL, 40,
     ["see", URL[:40], URL[40:]]),
    ("indentation kept after a line cut",
     "def f() -> int:\n    return 1\n\n    # indented comment line", 40,
     ["def f() -> int:\n    return 1", "    # indented comment line"]),
    ("fence re-opened with its info string",
     "Some intro text.\n```python\nx = 1\ny = 2\nz = 3\nw = 4\n```\nAfter.", 40,
     ["Some intro text.\n```python\nx = 1\n```", "```python\ny = 2\nz = 3\nw = 4\n```\nAfter."]),
    ("tilde fence", "~~~text\nalpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n~~~\ndone", 40,
     ["~~~text\nalpha\nbeta\ngamma\ndelta\n~~~", "~~~text\nepsilon\nzeta\n~~~\ndone"]),
    ("four backticks: an inner ``` does not close",
     "````md\n```js\ninner\n```\nmore lines here\nand more\n````\nend", 40,
     ["````md\n```js\ninner\n```\n````", "````md\nmore lines here\nand more\n````\nend"]),
    ("indented fence re-opened verbatim",
     "  ```py\nprint(1)\nprint(2)\nprint(3)\nprint(4)\n  ```", 40,
     ["  ```py\nprint(1)\nprint(2)\nprint(3)\n```", "  ```py\nprint(4)\n  ```"]),
    ("unclosed fence: the rest is code",
     "```sh\necho one\necho two\necho three\necho four\necho five", 40,
     ["```sh\necho one\necho two\necho three\n```", "```sh\necho four\necho five"]),
    ("outside a block beats inside when past half",
     "A paragraph of prose here.\n```\ncode a\ncode b\n```\ntail", 40,
     ["A paragraph of prose here.", "```\ncode a\ncode b\n```\ntail"]),
    ("outside too early: cut inside the block",
     "Intro.\n```\ncode line one\ncode line two\ncode line three\n```", 40,
     ["Intro.\n```\ncode line one\n```", "```\ncode line two\ncode line three\n```"]),
    ("inside a block, a blank line beats a later line break",
     "```\naaaaaaaaaaaa\nbbbbbbbbbbbb\n\ncccc\ndddd\neeeeeeeeeeeeeeeeee\n```", 40,
     ["```\naaaaaaaaaaaa\nbbbbbbbbbbbb\n```", "```\ncccc\ndddd\neeeeeeeeeeeeeeeeee\n```"]),
    ("no empty block right after the opening line",
     "Some words that fill the part.\n```\nabc\n```", 40,
     ["Some words that fill the part.", "```\nabc\n```"]),
    ("combining mark stays with its letter", "x" * 39 + "e\u0301" + "y" * 20, 40,
     ["x" * 39, "e\u0301" + "y" * 20]),
    ("ZWJ sequence kept whole", "x" * 38 + "\U0001f469\u200d\U0001f4bb" + "y" * 20, 40,
     ["x" * 38, "\U0001f469\u200d\U0001f4bb" + "y" * 20]),
    ("emoji modifier kept with its emoji", "x" * 39 + "\U0001f44d\U0001f3fd" + "y" * 10, 40,
     ["x" * 39, "\U0001f44d\U0001f3fd" + "y" * 10]),
    ("one cluster longer than a part is cut anyway", "a" + "\u0301" * 99, 40,
     ["a" + "\u0301" * 39, "\u0301" * 40, "\u0301" * 20]),
    ("whitespace only, too long: nothing to show", " " * 100, 40, []),
    ("whitespace that could only make a part is dropped", "end." + " " * 100, 40,
     ["end."]),
]


@pytest.mark.parametrize(("text", "limit", "expected"), [c[1:] for c in CUTS],
                         ids=[c[0] for c in CUTS])
def test_cuts(text: str, limit: int, expected: list[str]) -> None:
    assert split_message(text, limit) == expected
    if expected:
        check(text, limit)


@pytest.mark.parametrize("limit", [39, 10, 0, -1])
def test_limit_too_small(limit: int) -> None:
    with pytest.raises(ValueError, match="too small"):
        split_message("hi", limit)
    assert MIN_LIMIT == 40


@pytest.mark.parametrize(("size", "limit", "count"), [
    (5_000, 2_000, 3), (4_000, 2_000, 2), (2_001, 2_000, 2), (2_000, 2_000, 1)])
def test_counts(size: int, limit: int, count: int) -> None:
    words = ("word " * size)[:size]
    parts = check(words, limit)
    assert len(parts) == count
    assert all(2 * len(p) >= limit for p in parts[:-1])


def markdown_reply(size: int, seed: int) -> str:
    """A Markdown answer of about ``size`` characters: prose, lists and code blocks."""
    rnd = random.Random(seed)
    vocabulary = ["the", "agent", "reads", "a", "thread", "and", "answers", "in", "one", "reply",
                  "with", "code", "too"]
    chunks: list[str] = []
    n = 0
    while n < size:
        kind = rnd.choice(["prose", "prose", "list", "python", "shell"])
        if kind == "prose":
            chunk = " ".join(rnd.choice(vocabulary) for _ in range(rnd.randint(30, 120))) + "."
        elif kind == "list":
            chunk = "\n".join(f"- item {i}: " + " ".join(rnd.choices(vocabulary, k=8))
                              for i in range(rnd.randint(3, 8)))
        elif kind == "python":
            body = "\n".join(f"    value_{i} = compute({i}, {rnd.randint(0, 99)})"
                             for i in range(rnd.randint(10, 60)))
            chunk = f"```python\ndef run() -> None:\n{body}\n```"
        else:
            body = "\n".join(f"echo step {i}" for i in range(rnd.randint(5, 30)))
            chunk = f"~~~~bash\n{body}\n~~~~"
        chunks.append(chunk)
        n += len(chunk) + 2
    return "\n\n".join(chunks)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_markdown_reply(seed: int) -> None:
    text = markdown_reply(12_000, seed)
    assert 12_000 <= len(text) < 14_000 and "```python" in text
    parts = check(text, 4_000)
    assert 4 <= len(parts) <= 5
    assert all(2 * len(p) >= 4_000 for p in parts[:-1])
    for part in parts:
        # each part alone renders: fence lines pair up
        assert not ends_open(part), part[-200:]


def test_code_block_longer_than_a_part() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(1_000))
    text = f"Here:\n\n```python\n{code}\n```\n\nDone."
    parts = check(text, 2_000)
    assert len(parts) > 6
    assert all(p.startswith("```python\n") for p in parts[1:])
    assert all(p.endswith("\n```") for p in parts[:-1])
    assert parts[-1].endswith("```\n\nDone.")


def test_deterministic() -> None:
    text = markdown_reply(30_000, 7)
    assert split_message(text, 2_000) == split_message(text, 2_000)
    assert split_message(text, 2_000) != split_message(text, 3_000)


def test_big_text_is_not_quadratic() -> None:
    # Not a timing assertion: a quadratic split of these would time the suite out.
    for text in [markdown_reply(1_000_000, 3), "a " * 500_000, "```\n" + "x\n" * 500_000]:
        parts = split_message(text, 2_000)
        assert all(len(p) <= 2_000 for p in parts)


# --- the property, over generated text -------------------------------------------------------

def generated(rnd: random.Random) -> str:
    """Text built to hit every rule: fences of all kinds, long words, odd whitespace."""
    pieces: list[str] = []
    for _ in range(rnd.randint(1, 60)):
        roll = rnd.random()
        if roll < 0.35:
            pieces.append("".join(rnd.choices("abcdefghij", k=rnd.randint(1, 12))))
        elif roll < 0.5:
            pieces.append(rnd.choice([" ", " ", "  ", "\t", "\n", "\n\n", "\n\n\n", "\r\n"]))
        elif roll < 0.55:
            pieces.append("x" * rnd.randint(30, 200))
        elif roll < 0.6:
            pieces.append(rnd.choice(["e\u0301", "a\u0301\u0302", "\U0001f469\u200d\U0001f4bb",
                                      "\U0001f44d\U0001f3fd", "\u2764\ufe0f", "\u00a0"]))
        elif roll < 0.63:
            pieces.append(rnd.choice([" ", "\n"]) * rnd.randint(20, 300))
        else:
            char = rnd.choice("`~")
            fence = char * rnd.randint(3, 5)
            indent = " " * rnd.randint(0, 3)
            info = rnd.choice(["", "py", "python", "js x", "text"])
            lines = [rnd.choice(["    " + "".join(rnd.choices("abc xyz()", k=rnd.randint(0, 40))),
                                 "", char * 3 + "inner", "```", "~~~", "`" * 6])
                     for _ in range(rnd.randint(0, 12))]
            close = "" if rnd.random() < 0.15 else "\n" + " " * rnd.randint(0, 3) + fence + (
                char * rnd.randint(0, 2)) + rnd.choice(["", " "])
            pieces.append("\n" + indent + fence + info + "\n" + "\n".join(lines) + close + "\n")
    return "".join(pieces)


@pytest.mark.parametrize("seed", range(40))
def test_property(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(15):
        text = generated(rnd)
        check(text, rnd.choice([40, 41, 47, 60, 80, 120, 200, 500]))
