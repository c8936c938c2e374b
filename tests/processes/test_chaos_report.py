"""The soak's report of violations (chaos/report.py): the first 25 in full, with the faults
around each; every one after them in a line of its own, none hidden."""

from __future__ import annotations

from pathlib import Path

from chaos.invariants import Violation
from chaos.plan import make_plan
from chaos.report import violations
from chaos.system import History


def test_every_violation_is_said_past_the_first_25(tmp_path: Path) -> None:
    """seed 10404 printed 25 and "... and 6 more": those six were said nowhere."""
    plan = make_plan(7, 10.0, "sqlite", 1)
    found = [Violation(1, f"t{n}", f"run{n}", f"m{n:05d} answered twice") for n in range(31)]
    lines = violations(plan, found, History(), tmp_path, tmp_path / "plan.json")
    said = "\n".join(lines)
    assert all(f"m{n:05d} answered twice" in said for n in range(31))
    assert "... and 6 more, a line each:" in lines
    assert sum("faults around it" in line or "the last faults" in line for line in lines) == 25
