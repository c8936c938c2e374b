"""The context window: which part of a thread's history is sent to the model.

Pure functions, no I/O. The store keeps every entry; ``fit_history`` only picks
the newest suffix that fits ``[agent] max_context_tokens``. Token counts are
estimates (about four characters a token, plus a little per message): they
are meant to keep a request under a limit, not to bill it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, overload

from ..model.attachments.refs import FileRef
from ..model.entries import SUMMARY, AssistantTurn, Entry, Notice, ToolResult, UserMessage
from ..model.tokens import entry_tokens, estimate_tokens
from ..model.toolspec import ToolSpec

__all__ = ["Span", "SummaryScan", "Window", "file_line", "file_lines", "fit_history",
           "prompt_tokens", "split_summaries", "transcript"]


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)


def _units(entries: Sequence[Entry]) -> list[tuple[int, int]]:
    """``[start, end)`` ranges that are kept or dropped whole: a turn with tool calls and
    the results (and any notices among them) that answer it; any other entry alone."""
    units = []
    i, n = 0, len(entries)
    while i < n:
        entry, j = entries[i], i + 1
        if isinstance(entry, AssistantTurn) and entry.tool_calls:
            waiting = {c.id for c in entry.tool_calls}
            while j < n and waiting and isinstance(entries[j], ToolResult | Notice):
                result = entries[j]
                if isinstance(result, ToolResult):
                    waiting.discard(result.tool_call_id)
                j += 1
        units.append((i, j))
        i = j
    return units


def fit_history(
    entries: Sequence[Entry],
    system: str,
    max_tokens: int | None,
    *,
    tools: Sequence[ToolSpec] = (),
    memo: dict[int, int] | None = None,
    units: list[tuple[int, int]] | None = None,
) -> tuple[list[Entry], int]:
    """The newest suffix of ``entries`` that fits in ``max_tokens`` together with the
    system prompt (and ``tools``' descriptions), and how many entries were left out.
    (``memo``, ``units``: entry tokens by index and ``_units``, kept by a caller that fits
    the same entries again.)

    A tool call is never separated from its results. When something must be left
    out, the suffix starts at a user message if one is in it. When not even the
    newest entry fits, it is sent anyway (with its results): the model needs
    something to answer.
    """
    if max_tokens is None:
        return list(entries), 0
    budget = _budget(system, tools, max_tokens)
    units = _units(entries) if units is None else units
    first = len(units)
    used = 0
    memo = {} if memo is None else memo
    for k in range(len(units) - 1, -1, -1):
        start, end = units[k]
        cost = 0
        for i in range(start, end):
            if i not in memo:
                memo[i] = entry_tokens(entries[i])
            cost += memo[i]
        if used + cost > budget and first < len(units):
            break
        used += cost
        first = k
    if first == 0:  # it all fits: nothing to leave out
        return list(entries), 0
    starts = [units[k][0] for k in range(first, len(units))]
    start = next((s for s in starts if isinstance(entries[s], UserMessage)), starts[0])
    return list(entries[start:]), start


@dataclass
class SummaryScan:
    """Whether a thread holds a summary notice, checked incrementally (threads only grow):
    a thread without one, the usual case, is never copied to set summaries aside."""

    seen: int = 0
    found: bool = False

    def any(self, entries: Sequence[Entry]) -> bool:
        if len(entries) < self.seen:
            self.seen, self.found = 0, False
        if not self.found:
            for i in range(self.seen, len(entries)):
                entry = entries[i]
                if isinstance(entry, Notice) and entry.code == SUMMARY:
                    self.found = True
                    break
        self.seen = len(entries)
        return self.found


def split_summaries(entries: Sequence[Entry]) -> tuple[Sequence[Entry], Notice | None]:
    """The entries without their summary notices, and the newest summary (or None)."""
    summaries = [e for e in entries if isinstance(e, Notice) and e.code == SUMMARY]
    if not summaries:
        return entries, None
    return [e for e in entries if not (isinstance(e, Notice) and e.code == SUMMARY)], \
        summaries[-1]


def transcript(entries: Sequence[Entry], max_chars: int) -> str:
    """The entries as plain lines for a summary request, the middle cut if too long."""
    lines = []
    for entry in entries:
        if isinstance(entry, UserMessage):
            lines.append(f"user: {entry.text}")
            lines.extend(file_line(f) for f in entry.files)
        elif isinstance(entry, AssistantTurn):
            calls = "; ".join(f"{c.name}({_json(c.arguments)})" for c in entry.tool_calls)
            lines.append("assistant: " + entry.text + (f" [calls {calls}]" if calls else ""))
        elif isinstance(entry, ToolResult):
            lines.append(f"tool {entry.name} -> {_json(entry.content)}")
            lines.extend(file_line(f) for f in (*entry.files, *entry.images))
        else:
            lines.append(f"[{entry.code}] {entry.text}")
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + "\n[...]\n" + text[-half:]


_FILE_LINE = re.compile(r"^\[file .* sha256:[0-9a-f]{12}\]$", re.MULTILINE)


def file_line(ref: FileRef) -> str:
    """The one line a transcript or summary keeps of a file: ``[file report.pdf
    (application/pdf, 3 pages, 120 KB) sha256:0123456789ab]``."""
    return f"[file {ref.describe()} sha256:{ref.digest[:12]}]"


def file_lines(text: str) -> list[str]:
    """The file lines in ``text`` (a summary), in order."""
    return _FILE_LINE.findall(text)


def prompt_tokens(system: str, tools: Sequence[ToolSpec], entries: Sequence[Entry]) -> int:
    """About how many tokens a request of these parts is."""
    return fixed_tokens(system, tools) + sum(entry_tokens(e) for e in entries)


def fixed_tokens(system: str, tools: Sequence[ToolSpec]) -> int:
    """What the system prompt and the tools' descriptions take of a request."""
    return estimate_tokens(system) + sum(
        estimate_tokens(t.name + t.description + json.dumps(t.parameters)) for t in tools)


def _budget(system: str, tools: Sequence[ToolSpec], max_tokens: int) -> int:
    return max_tokens - fixed_tokens(system, tools)


class Span(Sequence[Entry]):
    """``entries[start:stop]`` without copying it: a thread's entries are only ever
    appended to, so what a span shows never changes, however the list grows after."""

    __slots__ = ("_entries", "_start", "_stop")

    def __init__(self, entries: Sequence[Entry], start: int = 0, stop: int | None = None
                 ) -> None:
        self._entries = entries
        self._start = start
        self._stop = len(entries) if stop is None else stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("span index out of range")
        return self._entries[self._start + index]

    def __iter__(self) -> Iterator[Entry]:
        return islice(self._entries, self._start, self._stop)

    def __repr__(self) -> str:
        return f"Span({list(self)!r})"


@dataclass
class Window:
    """Where the history sent to the model starts, for one thread, held steady.

    Prompt caches (Anthropic's, OpenAI's) reuse the longest unchanged start of a
    prompt: a window that slid by one turn every turn would never hit them. So once
    trimming starts, the cut leaves room to grow (``refit`` of the limit) and stays
    where it is until what follows it no longer fits; then it moves, once.

    Threads only grow, so the tokens from the cut on are kept as a running sum: a turn
    estimates only the entries new since the last one, and copies nothing.
    """

    start: int = 0
    refit: float = 0.6
    seen: int = 0
    """How many entries ``used`` counts."""
    used: int = 0
    """The estimated tokens of ``entries[start:seen]``."""
    fitted: bool = False
    """Whether ``start`` is a cut made (or held) before."""

    def hold(self, start: int) -> None:
        """Take up a cut made before (on a thread loaded from elsewhere)."""
        self.start, self.seen, self.used, self.fitted = start, start, 0, True

    def fit(
        self,
        entries: Sequence[Entry],
        system: str,
        max_tokens: int | None,
        *,
        tools: Sequence[ToolSpec] = (),
        known: Sequence[int] = (),
    ) -> tuple[Sequence[Entry], int]:
        """Like ``fit_history``, but keeps the last cut while the rest still fits.
        ``known``: the tokens of the first entries, where they are known already."""
        if max_tokens is None:
            return Span(entries), 0
        n = len(entries)
        if self.fitted and self.seen <= n:
            self.used += sum(entry_tokens(entries[i]) for i in range(self.seen, n))
            self.seen = n
            if self.used <= _budget(system, tools, max_tokens):
                return Span(entries, self.start, n), self.start
        memo: dict[int, int] = dict(enumerate(known))
        units = _units(entries)
        kept, dropped = fit_history(entries, system, max_tokens, tools=tools, memo=memo,
                                    units=units)
        if dropped:
            kept, dropped = fit_history(entries, system, int(max_tokens * self.refit),
                                        tools=tools, memo=memo, units=units)
        self.start, self.seen, self.fitted = dropped, n, True
        self.used = sum(memo[i] if i in memo else entry_tokens(entries[i])
                        for i in range(dropped, n))
        return kept, dropped
