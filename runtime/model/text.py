"""Split a long reply into parts that each fit a channel's message limit.

A reply longer than a channel allows (Discord 2,000 characters, Slack a few
thousand) is posted as several messages, and the outbox keys each part by its
index. So the split must be a pure function of ``(text, limit)`` -- a retried
delivery cuts the same parts -- and must never lose a character. Lengths are
``len()``, i.e. code points.

The cut rule. Each part takes as much of the remaining text as fits and ends at
the best boundary in that window. Boundaries, best first:

1. a blank line (``\\n\\n`` or more) outside a fenced code block;
2. a line break outside a fenced block;
3. a blank line inside a fenced block;
4. a line break inside a fenced block;
5. a run of spaces/tabs inside a line (not indentation, not trailing, not on a
   fence line), or ending the text;
6. a hard cut.

Within a kind the last boundary that fits wins. A kind is used only if its part
is at least half the limit (``2 * len(part) >= limit``, counting re-added fence
lines), so a blank line near the start does not make a tiny part. If no
boundary reaches half, the last boundary of any kind wins (a short part beats
breaking a word); with no boundary at all, a hard cut fills the part, stepping
back so a combining mark, variation selector, emoji modifier or ZWJ join stays
with the character before it, and never cutting through a fence line.

At a cut, the run of newlines or of spaces/tabs there is dropped; nothing else
is dropped or changed, except whitespace that could only make a part of
whitespace (so whitespace-only text longer than the limit gives ``[]``).

A cut inside a fenced block (CommonMark: 3+ backticks or tildes indented at
most 3 spaces; closed by a line of the same character, at least as many, and
nothing after; an unclosed fence runs to the end) ends the part with a closing
fence of the same character and length, and the next part starts with the
original opening line, info string included; both lines count towards the
limit. Cuts that would leave an empty block (just after an opening line, just
before a closing one) are not used. A block whose opening line is longer than a
quarter of the limit is treated as plain text, so fence lines never take more
than half a part. Fences inside block quotes or list items are not recognised.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["split_message"]

MIN_LIMIT = 40
"""Below this a re-opened fence (say ```` ```python ```` plus a closing line)
leaves too little room for the code it wraps."""

_FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,})[^\n]*", re.MULTILINE)
_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_NONSPACE = re.compile(r"\S")
_NEWLINES = re.compile(r"\n+")
_BLANKS = re.compile(r"[ \t]+")
_ZWJ = "\u200d"
_CLUSTER = 32
"""How far a hard cut steps back to keep a character with its marks and joins."""


@dataclass(frozen=True, slots=True)
class _Fence:
    """A fenced block: its opening line and the span a cut re-opens it in."""

    opener: str
    close: str
    open_end: int
    """Index of the newline that ends the opening line."""
    close_start: int
    """Index where the closing line starts (``len(text)`` if never closed)."""
    kept: bool
    """Whether a cut inside re-opens the block (its opening line is short enough)."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """The fenced blocks of one text and the spans of their fence lines."""

    fences: list[_Fence]
    open_ends: list[int]
    line_starts: list[int]
    """Start of every opening or closing fence line, ascending."""
    line_ends: list[int]


def _layout(text: str, limit: int) -> _Layout:
    """One regex pass over the lines that could be fences; other lines can't matter."""
    fences: list[_Fence] = []
    line_starts: list[int] = []
    line_ends: list[int] = []
    current: tuple[str, str, int] | None = None  # opening line, closing fence, open_end
    for m in _FENCE_LINE.finditer(text):
        body = m[0].removesuffix("\r")
        if current is None:
            opened = _OPEN.fullmatch(body)
            if opened is None or (opened[1][0] == "`" and "`" in opened[2]):
                continue
            current = (body, opened[1], m.end())
        else:
            closed = _CLOSE.fullmatch(body)
            opener, close, open_end = current
            if closed is None or closed[1][0] != close[0] or len(closed[1]) < len(close):
                continue
            fences.append(_Fence(opener, close, open_end, m.start(), _fits(opener, limit)))
            current = None
        line_starts.append(m.start())
        line_ends.append(m.end())
    if current is not None:
        opener, close, open_end = current
        fences.append(_Fence(opener, close, open_end, len(text), _fits(opener, limit)))
    return _Layout(fences, [f.open_end for f in fences], line_starts, line_ends)


def _fits(opener: str, limit: int) -> bool:
    # Opening plus closing line (never longer) then take at most half a part.
    return 4 * (len(opener) + 1) <= limit


def _glued(text: str, i: int) -> bool:
    """Whether a hard cut before ``text[i]`` would split a visible character."""
    if not 0 < i < len(text):
        return False
    ch = text[i]
    return (ch == _ZWJ or text[i - 1] == _ZWJ or "\ufe00" <= ch <= "\ufe0f"
            or "\U0001f3fb" <= ch <= "\U0001f3ff" or unicodedata.combining(ch) != 0)


class _Splitter:
    """The cut search for one ``(text, limit)``; every scan runs right to left with
    ``str.rfind``, and each tier skips whole blocks, so a split stays linear."""

    def __init__(self, text: str, limit: int) -> None:
        self.text = text
        self.limit = limit
        self.layout = _layout(text, limit)

    def open_at(self, i: int) -> _Fence | None:
        """The re-opened block that a part ending (or starting) at ``i`` is inside."""
        j = bisect_right(self.layout.open_ends, i) - 1
        if j < 0:
            return None
        fence = self.layout.fences[j]
        return fence if fence.kept and i <= fence.close_start else None

    def closing(self, i: int) -> int:
        """Length of the closing fence line a part ending at ``i`` needs."""
        fence = self.open_at(i)
        return 0 if fence is None else len(fence.close) + 1

    def fence_line(self, i: int) -> tuple[int, int] | None:
        """The ``(start, end)`` of the fence line holding ``text[i]``, if it is on one."""
        j = bisect_right(self.layout.line_starts, i) - 1
        if j >= 0 and i <= self.layout.line_ends[j]:
            return self.layout.line_starts[j], self.layout.line_ends[j]
        return None

    def spans(self) -> Iterator[tuple[str, int, int, str]]:
        """``(prefix, start, end, suffix)``: part i is ``prefix + text[start:end] + suffix``."""
        text = self.text
        pos = 0
        while (m := _NONSPACE.search(text, pos)) is not None:
            first = m.start()
            fence = self.open_at(pos)
            prefix = "" if fence is None else fence.opener + "\n"
            if len(prefix) + len(text) - pos <= self.limit:
                yield prefix, pos, len(text), ""
                return
            cut = self.boundary(pos, len(prefix), first)
            if cut is None:
                end = resume = self.hard(pos, len(prefix))
            else:
                end, resume = cut
            if end <= first:  # a window of whitespace only: drop it, resume at a line start
                line_start = text.rfind("\n", pos, first) + 1
                pos = line_start if line_start > pos else first
                continue
            fence = self.open_at(end)
            if fence is None or _NONSPACE.search(text, resume) is None:
                yield prefix, pos, end, ""  # nothing re-opens after the last part
            else:
                yield prefix, pos, end, "\n" + fence.close
            pos = resume

    def size(self, pos: int, prefix: int, end: int) -> int:
        return prefix + end - pos + self.closing(end)

    def boundary(self, pos: int, prefix: int, first: int) -> tuple[int, int] | None:
        """The best ``(end, resume)`` boundary for a part starting at ``pos``, if any."""
        limit = self.limit
        hi = pos + limit - prefix
        # Below ``lo`` no part can reach half the limit, whatever closing line it gets.
        lo = max(first + 1, pos - prefix - limit // 4 + (limit + 1) // 2)
        for needle, inside in (("\n\n", False), ("\n", False), ("\n\n", True), ("\n", True)):
            cut = self.tier(pos, prefix, first, lo, hi, needle, inside)
            if cut is not None:
                return cut
        last = next(self.newline_cuts(pos, prefix, first, hi), None)
        stop = first if last is None else max(first, last[0])
        # No newline run reaches half, so the last space run (tier 5 if it reaches half) is
        # also the last boundary of any kind; failing that, the last newline run.
        space = next(self.space_cuts(pos, prefix, stop, hi), None)
        return last if space is None else space

    def segments(self, lo: int, hi: int, inside: bool) -> Iterator[tuple[int, int]]:
        """The ``[a, b]`` stretches of ``[lo, hi]`` inside (or outside) re-opened blocks, last
        first."""
        fences = self.layout.fences
        j = bisect_right(self.layout.open_ends, hi) - 1
        top = hi
        while top >= lo:
            while j >= 0 and not fences[j].kept:
                j -= 1
            fence = fences[j] if j >= 0 and fences[j].close_start >= lo else None
            if fence is None:
                if not inside:
                    yield lo, top
                return
            a, b = max(fence.open_end, lo), min(fence.close_start, top)
            if inside and a <= b:
                yield a, b
            if not inside and b < top:
                yield max(b + 1, lo), top
            top, j = a - 1, j - 1

    def tier(self, pos: int, prefix: int, first: int, lo: int, hi: int, needle: str,
             inside: bool) -> tuple[int, int] | None:
        """The last newline run of one kind in ``[lo, hi]`` whose part is at least half the
        limit."""
        text = self.text
        for a, b in self.segments(lo, hi, inside):
            p = b
            while (i := text.rfind(needle, a, p + len(needle))) >= 0:
                while i > first and text[i - 1] == "\n":
                    i -= 1
                if i < lo:  # the run starts too early, and so does every run before it
                    return None
                p = i - 1
                fence = self.open_at(i)
                if (fence is not None) != inside or not self.usable(i, fence):
                    continue
                size = self.size(pos, prefix, i)
                if size <= self.limit and 2 * size >= self.limit:
                    return i, self.run_end(i)
        return None

    def run_end(self, i: int) -> int:
        m = _NEWLINES.match(self.text, i)
        assert m is not None
        return m.end()

    def usable(self, i: int, fence: _Fence | None) -> bool:
        """Whether a line cut at ``i`` in ``fence`` leaves no empty block on either side."""
        return fence is None or (i != fence.open_end and self.run_end(i) < fence.close_start)

    def newline_cuts(self, pos: int, prefix: int, first: int, hi: int) -> Iterator[tuple[int, int]]:
        """Every usable newline run in ``(first, hi]`` whose part fits, last first."""
        text = self.text
        p = hi
        while (i := text.rfind("\n", first + 1, p + 1)) >= 0:
            while i > first + 1 and text[i - 1] == "\n":
                i -= 1
            p = i - 1
            if self.usable(i, self.open_at(i)) and self.size(pos, prefix, i) <= self.limit:
                yield i, self.run_end(i)

    def space_cuts(self, pos: int, prefix: int, stop: int, hi: int) -> Iterator[tuple[int, int]]:
        """Every run of spaces/tabs inside a line, after ``stop`` and before ``hi``, whose part
        fits, last first."""
        text = self.text
        space = text.rfind(" ", pos, hi + 1)
        tab = text.rfind("\t", pos, hi + 1)
        while (i := max(space, tab)) > stop:
            end = i
            while end > pos and text[end - 1] in " \t":
                end -= 1
            m = _BLANKS.match(text, i)
            assert m is not None
            resume = m.end()
            if (end > stop and text[end - 1] != "\n"
                    and text[resume:resume + 1] not in ("\r", "\n") and self.fence_line(i) is None
                    and not _glued(text, resume) and self.size(pos, prefix, end) <= self.limit):
                yield end, resume
            # rfind again only once the old hit is used up, so the scan stays linear
            space = text.rfind(" ", pos, end) if space >= end else space
            tab = text.rfind("\t", pos, end) if tab >= end else tab

    def hard(self, pos: int, prefix: int) -> int:
        """Where a hard cut ends a part starting at ``pos``: as far as fits, whole characters."""
        text = self.text
        end = pos + self.limit - prefix
        while True:
            cut = end
            while cut > max(pos + 1, end - _CLUSTER) and _glued(text, cut):
                cut -= 1
            end = end if _glued(text, cut) else cut  # no cluster is this long: cut anyway
            line = self.fence_line(end)
            if line is not None and pos < line[0] < end < line[1]:
                end = line[0]  # never through a fence line
            need = self.closing(end)
            if prefix + end - pos + need <= self.limit:
                return end
            end = pos + self.limit - prefix - need


def split_message(text: str, limit: int) -> list[str]:
    """``text`` as parts of at most ``limit`` characters, cut by the rule in this module's doc.

    Deterministic, so the outbox can key part i of a delivery; every part is
    non-empty and shows something, and only whitespace at the cuts is lost.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit {limit} is too small to split a message (minimum {MIN_LIMIT})")
    if len(text) <= limit:
        return [text]
    return [prefix + text[start:end] + suffix
            for prefix, start, end, suffix in _Splitter(text, limit).spans()]
