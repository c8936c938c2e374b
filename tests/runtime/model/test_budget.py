"""Budgets (runtime/model/budget.py), by tables: what a run has spent, and the verdict
before each turn (``ok``, ``final`` past ``final_turn_at``, ``exceeded`` at a limit)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runtime import Run, Usage
from runtime.model.budget import OK, BudgetConfig, Spend, Verdict, check_budget


@pytest.mark.parametrize(("limits", "spend", "expected"), [
    ({}, Spend(input_tokens=10**9, cost_usd=10**6), OK),  # no limits: nothing to add up
    ({"max_output_tokens": 100}, Spend(output_tokens=79), OK),
    ({"max_output_tokens": 100}, Spend(output_tokens=80),
     Verdict("final", "max_output_tokens", "max_output_tokens = 100, spent 80")),
    ({"max_output_tokens": 100}, Spend(output_tokens=100),
     Verdict("exceeded", "max_output_tokens", "max_output_tokens = 100, spent 100")),
    ({"max_cost_usd": 0.5}, Spend(cost_usd=0.75),
     Verdict("exceeded", "max_cost_usd", "max_cost_usd = 0.5, spent 0.75")),
    ({"max_wall_s": 60, "final_turn_at": 0.5}, Spend(wall_s=30),
     Verdict("final", "max_wall_s", "max_wall_s = 60, spent 30")),
    ({"max_wall_s": 60, "final_turn_at": 0.5}, Spend(wall_s=29.9), OK),
    ({"max_cost_usd_per_thread_day": 2}, Spend(thread_day_cost_usd=2),
     Verdict("exceeded", "max_cost_usd_per_thread_day",
             "max_cost_usd_per_thread_day = 2, spent 2")),
    # Calls past max_tool_calls are refused one by one: the run gets a last turn instead.
    ({"max_tool_calls": 5}, Spend(tool_calls=5),
     Verdict("final", "max_tool_calls", "max_tool_calls = 5, spent 5")),
    ({"max_tool_calls": 5}, Spend(tool_calls=50),
     Verdict("final", "max_tool_calls", "max_tool_calls = 5, spent 50")),
    # One limit reached ends the run, whatever the others say.
    ({"max_input_tokens": 100, "max_tool_calls": 5}, Spend(input_tokens=100, tool_calls=5),
     Verdict("exceeded", "max_input_tokens", "max_input_tokens = 100, spent 100")),
    ({"max_input_tokens": 100, "max_total_tokens": 1000},
     Spend(input_tokens=90, total_tokens=1000),
     Verdict("exceeded", "max_total_tokens", "max_total_tokens = 1000, spent 1000")),
    # Near two limits: the first in the order of the config's fields is named.
    ({"max_input_tokens": 100, "max_output_tokens": 100}, Spend(input_tokens=90,
                                                                output_tokens=90),
     Verdict("final", "max_input_tokens", "max_input_tokens = 100, spent 90")),
])
def test_check_budget(limits: dict[str, Any], spend: Spend, expected: Verdict) -> None:
    assert check_budget(BudgetConfig(**limits), spend) == expected


def test_the_limits_are_those_set_in_order() -> None:
    assert BudgetConfig().limits == ()
    cfg = BudgetConfig(max_wall_s=30, max_input_tokens=10)
    assert cfg.limits == (("max_input_tokens", "input_tokens", 10),
                          ("max_wall_s", "wall_s", 30))
    assert not cfg.needs_thread_day
    assert BudgetConfig(max_cost_usd_per_thread_day=1).needs_thread_day


@pytest.mark.parametrize("bad", [{"max_input_tokens": 0}, {"max_cost_usd": 0},
                                 {"max_wall_s": -1}, {"final_turn_at": 0},
                                 {"final_turn_at": 1.5}, {"max_turns": 3}])
def test_a_limit_out_of_range_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=next(iter(bad))):
        BudgetConfig(**bad)


def test_what_a_run_spent_counts_cached_input_as_input() -> None:
    usage = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=300,
                  cache_creation_tokens=50)
    run = Run(id="r", thread_id="t", text="hi", usage=usage, cost_usd=0.25, tool_calls=3,
              started_at=1000.0)
    spend = Spend.of(run, now=1012.5, thread_day_cost_usd=1.5)
    assert spend == Spend(input_tokens=450, output_tokens=20, total_tokens=470,
                          cost_usd=0.25, tool_calls=3, wall_s=12.5,
                          thread_day_cost_usd=1.5)


def test_a_run_not_started_has_spent_no_time() -> None:
    assert Spend.of(Run(id="r", thread_id="t", text="hi"), now=1e9).wall_s == 0
