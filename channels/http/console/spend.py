"""Spend: tokens and cost per day and per thread, and the chart drawn as SVG on the server
(no charting library: a few rectangles, styled by the console's stylesheet); the votes on
answers (👍 / 👎) per day and per thread beside them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from markupsafe import Markup, escape

from runtime import Run, Vote, person_key, place_key

__all__ = ["Day", "Feedback", "Spend", "bar_chart", "feedback_of", "spend_of"]


@dataclass
class Day:
    day: date
    tokens: int = 0
    cost_usd: float = 0.0
    runs: int = 0


@dataclass
class Spend:
    days: list[Day]
    threads: list[tuple[str, int, float, int]] = field(default_factory=list)
    """(thread id, tokens, cost, runs), the costliest first."""
    groups: dict[str, list[tuple[str, int, float, int]]] = field(default_factory=dict)
    """The same by agent, by person and by place ("agent", "user", "place")."""

    @property
    def tokens(self) -> int:
        return sum(d.tokens for d in self.days)

    @property
    def cost_usd(self) -> float:
        return sum(d.cost_usd for d in self.days)

    @property
    def runs(self) -> int:
        return sum(d.runs for d in self.days)


def spend_of(runs: Sequence[Run], *, days: int, now: float, top: int = 20,
             default_agent: str = "") -> Spend:
    """What the runs created in the last ``days`` days (UTC days, today included) cost, in
    all and by thread, agent, person and place."""
    today = datetime.fromtimestamp(now, UTC).date()
    first = today - timedelta(days=days - 1)
    by_day = {first + timedelta(days=i): Day(first + timedelta(days=i)) for i in range(days)}
    keys: dict[str, Callable[[Run], str]] = {
        "thread": lambda r: r.thread_id, "agent": lambda r: r.agent or default_agent,
        "user": lambda r: person_key(r.origin), "place": lambda r: place_key(r.origin)}
    sums: dict[str, dict[str, list[float]]] = {k: defaultdict(lambda: [0, 0.0, 0])
                                               for k in keys}
    for run in runs:
        day = by_day.get(datetime.fromtimestamp(run.created_at, UTC).date())
        if day is None:
            continue
        tokens = run.usage.total_tokens
        day.tokens += tokens
        day.cost_usd += run.cost_usd
        day.runs += 1
        for group, key in keys.items():
            row = sums[group][key(run)]
            row[0] += tokens
            row[1] += run.cost_usd
            row[2] += 1
    groups = {group: sorted(((k, int(s[0]), s[1], int(s[2])) for k, s in rows.items()),
                            key=lambda row: (-row[2], -row[1], row[0]))[:top]
              for group, rows in sums.items()}
    return Spend(list(by_day.values()), groups.pop("thread"), groups)


@dataclass
class Feedback:
    days: list[tuple[date, int, int]]
    """(day, 👍, 👎), oldest first."""
    threads: list[tuple[str, int, int]] = field(default_factory=list)
    """(thread id, 👍, 👎), the most voted first."""

    @property
    def up(self) -> int:
        return sum(d[1] for d in self.days)

    @property
    def down(self) -> int:
        return sum(d[2] for d in self.days)


def feedback_of(votes: Sequence[Vote], *, days: int, now: float, top: int = 20) -> Feedback:
    """The votes given (or last changed) in the last ``days`` days (UTC days, today
    included), counted per day and per thread."""
    today = datetime.fromtimestamp(now, UTC).date()
    first = today - timedelta(days=days - 1)
    by_day = {first + timedelta(days=i): [0, 0] for i in range(days)}
    by_thread: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for vote in votes:
        day = by_day.get(datetime.fromtimestamp(vote.at, UTC).date())
        if day is None:
            continue
        which = 0 if vote.value == "up" else 1
        day[which] += 1
        by_thread[vote.thread_id][which] += 1
    threads = sorted(((t, c[0], c[1]) for t, c in by_thread.items()),
                     key=lambda row: (-(row[1] + row[2]), row[0]))
    return Feedback([(d, c[0], c[1]) for d, c in by_day.items()], threads[:top])


def bar_chart(values: Sequence[float], labels: Sequence[str], *, title: str, unit: str,
              css: str, width: int = 720, height: int = 180) -> Markup:
    """A bar per value, with its label under it and its value as a tooltip."""
    pad_left, pad_bottom, pad_top = 8, 22, 16
    n = max(1, len(values))
    peak = max(values, default=0) or 1
    slot = (width - pad_left) / n
    bar = max(2.0, slot * 0.7)
    inner = height - pad_bottom - pad_top
    every = max(1, n // 10)  # at most about ten labels
    parts = [f'<svg class="chart {escape(css)}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>",
             f'<line class="axis" x1="{pad_left}" y1="{height - pad_bottom}" '
             f'x2="{width}" y2="{height - pad_bottom}"/>']
    for i, (value, label) in enumerate(zip(values, labels, strict=True)):
        h = inner * value / peak
        x = pad_left + i * slot + (slot - bar) / 2
        y = height - pad_bottom - h
        shown = f"{value:,.4f}" if unit == "$" else f"{value:,.0f}"
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                     f'height="{h:.1f}"><title>{escape(label)}: {escape(shown)} '
                     f"{escape(unit)}</title></rect>")
        if i % every == 0:
            parts.append(f'<text class="label" x="{x + bar / 2:.1f}" y="{height - 6}" '
                         f'text-anchor="middle">{escape(label)}</text>')
    if max(values, default=0) > 0:
        # Without a spend there is no maximum to show (``peak`` is 1 then only so the bars
        # can be drawn, at zero height): "max 1.0000 $" would be made up.
        top = f"{peak:,.4f} {unit}" if unit == "$" else f"{peak:,.0f} {unit}"
        parts.append(f'<text class="label" x="{pad_left}" y="11">{escape("max " + top)}'
                     "</text>")
    else:
        parts.append(f'<text class="label" x="{pad_left}" y="11">none</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
