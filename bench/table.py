"""The one table ``python -m bench`` prints: a figure, its baseline, the ratio, the target."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Row", "render", "verdict"]

HEADER = ("workload", "measure", "maiden", "baseline", "ratio", "target", "")


@dataclass(frozen=True)
class Row:
    workload: str
    measure: str
    maiden: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    verdict: str = ""
    why: str = ""
    """Why a target is missed, printed under the table when it is (not a column)."""

    def cells(self) -> tuple[str, ...]:
        return (self.workload, self.measure, self.maiden, self.baseline, self.ratio,
                self.target, self.verdict)


def verdict(value: float, *, at_most: float | None = None, at_least: float | None = None) -> str:
    """``ok`` or ``MISS`` against a target; printed, never asserted."""
    met = (at_most is None or value <= at_most) and (at_least is None or value >= at_least)
    return "ok" if met else "MISS"


def render(rows: Sequence[Row]) -> str:
    """A plain-text table; numbers right-aligned, a rule between workloads."""
    table = [HEADER, *(r.cells() for r in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(HEADER))]
    right = {2, 3, 4}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [line(HEADER), rule]
    previous = None
    for row in rows:
        cells = row.cells()
        if row.workload == previous:
            cells = ("", *cells[1:])
        elif previous is not None:
            out.append("")
        out.append(line(cells))
        previous = row.workload
    misses = [r for r in rows if r.verdict == "MISS"]
    if misses:
        out += ["", "Missed targets, and why:"]
        out += [f"  {r.workload} / {r.measure.strip()}: {r.why or 'see bench/README.md'}"
                for r in misses]
    return "\n".join(out)
