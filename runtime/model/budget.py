"""Budgets: what a run (and a thread, per day) may spend, checked before each turn."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from pydantic import Field

from .config import Prices, Section
from .runs import Run

__all__ = ["OK", "BudgetConfig", "Prices", "Spend", "Verdict", "check_budget"]


class BudgetConfig(Section):
    """``[budget]``: every limit is optional; a run ends ``budget_exceeded`` past one."""

    max_input_tokens: int | None = Field(default=None, ge=1, description=(
        "input tokens one run may spend, cache reads and writes included"))
    max_output_tokens: int | None = Field(
        default=None, ge=1, description="output tokens one run may spend")
    max_total_tokens: int | None = Field(
        default=None, ge=1, description="tokens one run may spend: input, output and cached")
    max_cost_usd: float | None = Field(default=None, gt=0, description=(
        "USD one run may spend, at its provider's prices (all 0 unless set)"))
    max_tool_calls: int | None = Field(default=None, ge=1, description=(
        "tool calls one run may make; those beyond get too_many_calls, and the model a "
        "last turn without tools"))
    max_wall_s: float | None = Field(default=None, gt=0, description=(
        "wall-clock seconds one run may take from its start"))
    max_cost_usd_per_thread_day: float | None = Field(default=None, gt=0, description=(
        "USD the runs of one thread may spend in a UTC day (a chatty thread, a schedule)"))
    final_turn_at: float = Field(default=0.8, gt=0, le=1,
                                 description="fraction of a budget that triggers the final turn")

    @property
    def needs_thread_day(self) -> bool:
        return self.max_cost_usd_per_thread_day is not None

    @cached_property
    def limits(self) -> tuple[tuple[str, str, float], ...]:
        """The limits set: each one's key, the ``Spend`` field it bounds, its value (most
        agents set none: then a turn has nothing to add up)."""
        return tuple((key, field, limit) for key, field in _LIMITS
                     if (limit := getattr(self, key)) is not None)


@dataclass(frozen=True, slots=True)
class Spend:
    """What has been spent so far, in the units the budgets use."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    tool_calls: int = 0
    wall_s: float = 0.0
    thread_day_cost_usd: float = 0.0

    @classmethod
    def of(cls, run: Run, now: float, thread_day_cost_usd: float = 0.0) -> Spend:
        """What ``run`` has spent by ``now`` (its thread's other runs today: given)."""
        usage = run.usage
        return cls(input_tokens=usage.input_tokens + usage.cache_read_tokens
                   + usage.cache_creation_tokens,
                   output_tokens=usage.output_tokens, total_tokens=usage.total_tokens,
                   cost_usd=run.cost_usd, tool_calls=run.tool_calls,
                   wall_s=now - (run.started_at or now),
                   thread_day_cost_usd=thread_day_cost_usd)


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Literal["ok", "final", "exceeded"]
    budget: str | None = None
    detail: str = ""


OK = Verdict("ok")
"""Within every budget."""

_LIMITS = (
    ("max_input_tokens", "input_tokens"),
    ("max_output_tokens", "output_tokens"),
    ("max_total_tokens", "total_tokens"),
    ("max_cost_usd", "cost_usd"),
    ("max_tool_calls", "tool_calls"),
    ("max_wall_s", "wall_s"),
    ("max_cost_usd_per_thread_day", "thread_day_cost_usd"),
)


def check_budget(cfg: BudgetConfig, spend: Spend) -> Verdict:
    """``exceeded`` if any limit is reached, ``final`` if one is past ``final_turn_at``."""
    near: Verdict | None = None
    for key, field, limit in cfg.limits:
        used = getattr(spend, field)
        # Calls past max_tool_calls are refused one by one where they are dispatched, and
        # the model still gets a tool-less turn to answer in; every other budget is spent
        # once it is reached.
        if used >= limit and key != "max_tool_calls":
            return Verdict("exceeded", key, f"{key} = {limit:g}, spent {used:g}")
        if near is None and used >= limit * cfg.final_turn_at:
            near = Verdict("final", key, f"{key} = {limit:g}, spent {used:g}")
    return near or OK
