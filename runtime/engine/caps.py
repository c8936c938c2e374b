"""Spend caps: what a person, a place or an agent may spend per day or per month.

    [[budgets]]
    scope = "user"          # each person: user; each place: place; each agent: agent
    cost_usd = 2.0          # and/or tokens
    period = "day"          # or "month"

Spend is read from the store (the runs' usage as last checkpointed, by when each run was
created), so every replica on one store counts the same; on PostgreSQL the period is
placed by the database's clock. A cap reached refuses the next message with one reply
that names it and when it resets; a run already going stops at its next model turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ..model.config import AGENT_NAME, Section
from ..model.routing import place_key
from ..model.runs import Origin, Run
from ..stores.base import RunStore, SpendAsk

__all__ = ["CapConfig", "CapHit", "Caps", "period_bounds"]

Scope = Literal["user", "place", "agent"]
Period = Literal["day", "month"]
Measure = Literal["tokens", "cost_usd"]


class CapConfig(Section):
    """One ``[[budgets]]`` table."""

    scope: Scope = Field(description="user: each person; place: each channel or DM; "
                                     "agent: each agent")
    period: Period = Field(default="day", description=(
        "when the count starts again: each midnight (day) or the 1st's (month), in "
        "timezone"))
    tokens: int | None = Field(default=None, ge=1,
                               description="tokens (input, output and cached) in a period")
    cost_usd: float | None = Field(default=None, gt=0,
                                   description="USD in a period, from the provider's prices")
    user: str | None = Field(default=None, min_length=1,
                             description="scope user: only this person (else each)")
    place: str | None = Field(default=None, min_length=1,
                              description="scope place: only this channel id (else each)")
    agent: str | None = Field(default=None, pattern=AGENT_NAME,
                              description="scope agent: only this agent (else each)")
    timezone: str | None = Field(default=None, description=(
        "IANA zone where a period starts at midnight; default [agent] timezone"))

    @field_validator("user", "place", "agent")
    @classmethod
    def _of_its_scope(cls, value: str | None, info: ValidationInfo) -> str | None:
        scope = info.data.get("scope")
        if value is not None and scope is not None and info.field_name != scope:
            raise ValueError(f"only a cap of scope {info.field_name!r} names a "
                             f"{info.field_name} (this one's scope is {scope!r})")
        return value

    @field_validator("timezone")
    @classmethod
    def _a_zone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ValueError, KeyError):
                raise ValueError(f"unknown timezone {value!r}") from None
        return value

    @model_validator(mode="after")
    def _a_limit(self) -> CapConfig:
        if self.tokens is None and self.cost_usd is None:
            raise ValueError("set tokens and/or cost_usd: the cap's limit")
        return self


def period_bounds(period: Period, now: float, zone: ZoneInfo) -> tuple[float, float]:
    """When the period holding ``now`` started and when the next one starts."""
    at = datetime.fromtimestamp(now, zone)
    start = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "month":
        start = start.replace(day=1)
        nxt = (start + timedelta(days=32)).replace(day=1)
    else:
        nxt = start + timedelta(days=1)
    return start.timestamp(), nxt.timestamp()


@dataclass(frozen=True, slots=True)
class CapHit:
    """A cap that is reached: which, how much was spent, and when it resets."""

    cap: CapConfig
    label: str
    """Whose cap, in words: ``you``, ``this place (slack:C1)``, ``the agent support``."""
    measure: Measure
    spent: float
    limit: float
    resets_at: float
    zone: str

    @property
    def detail(self) -> str:
        """For the run's error: ``[[budgets]] user day cost_usd = 2, spent 2.1``."""
        return (f"spend cap [[budgets]] scope {self.cap.scope}, {self.cap.period}: "
                f"{self.measure} = {self.limit:g}, spent {self.spent:g}")

    def notice(self) -> str:
        """The one reply a refused message gets."""
        amount = (f"${self.spent:,.2f} of ${self.limit:,.2f}" if self.measure == "cost_usd"
                  else f"{self.spent:,.0f} of {self.limit:,.0f} tokens")
        period = {"day": "daily", "month": "monthly"}[self.cap.period]
        resets = datetime.fromtimestamp(self.resets_at, ZoneInfo(self.zone))
        return (f"Sorry, the {period} spend cap for {self.label} is reached ({amount}). "
                f"It resets {resets:%Y-%m-%d %H:%M} {self.zone}.")


class Caps:
    """The ``[[budgets]]`` of a runtime, checked against what the store says was spent."""

    def __init__(self, caps: Sequence[CapConfig], store: RunStore, *, default_agent: str,
                 timezone: str = "UTC", clock: Callable[[], float] = time.time) -> None:
        self.caps = tuple(caps)
        self.store = store
        self.default_agent = default_agent
        self.timezone = timezone
        self.clock = clock

    def __bool__(self) -> bool:
        return bool(self.caps)

    @property
    def scopes(self) -> frozenset[Scope]:
        """The scopes caps are configured for (the store indexes their spend)."""
        return frozenset(cap.scope for cap in self.caps)

    async def reached(self, run: Run) -> CapHit | None:
        """The first cap that applies to ``run`` and is reached, if any: what each cap that
        applies counts, summed by the store in one read (by indexes of whose it is)."""
        agent = run.agent or self.default_agent
        mine = [(cap, ZoneInfo(cap.timezone or self.timezone)) for cap in self.caps
                if _applies(cap, run.origin, agent)]
        if not mine:
            return None
        now = self.clock()
        spent = await self.store.spent(self._asks(mine, run, agent, now))
        if spent.now is not None and any(
                period_bounds(cap.period, now, zone) != period_bounds(cap.period, spent.now,
                                                                      zone)
                for cap, zone in mine):
            # The store's clock is in another period than ours: it decides.
            now = spent.now
            spent = await self.store.spent(self._asks(mine, run, agent, now))
        now = spent.now if spent.now is not None else now
        for (cap, zone), (tokens, cost) in zip(mine, spent.sums, strict=True):
            limits: tuple[tuple[Measure, float, float | None], ...] = (
                ("tokens", tokens, cap.tokens), ("cost_usd", cost, cap.cost_usd))
            for measure, used, limit in limits:
                if limit is not None and used >= limit:
                    return CapHit(cap, _label(cap, run.origin, agent), measure, used, limit,
                                  period_bounds(cap.period, now, zone)[1], str(zone))
        return None

    def _asks(self, caps: list[tuple[CapConfig, ZoneInfo]], run: Run, agent: str,
              now: float) -> list[SpendAsk]:
        return [SpendAsk(period_bounds(cap.period, now, zone)[0], cap.scope,
                         _keys(cap, run.origin, agent, self.default_agent))
                for cap, zone in caps]


def _applies(cap: CapConfig, origin: Origin, agent: str) -> bool:
    if cap.scope == "user":
        return origin.user is not None and cap.user in (None, origin.user)
    if cap.scope == "place":
        return cap.place is None or place_key(origin).partition(":")[2] == cap.place
    return cap.agent in (None, agent)


def _keys(cap: CapConfig, origin: Origin, agent: str, default: str) -> tuple[str, ...]:
    """The store's keys of the spend that counts toward ``cap`` for a run from ``origin``
    of ``agent`` (the default agent's runs from before there were several have none)."""
    if cap.scope == "user":
        return (origin.user or "",)
    if cap.scope == "agent":
        return (agent, "") if agent == default else (agent,)
    return (place_key(origin),)


def _label(cap: CapConfig, origin: Origin, agent: str) -> str:
    if cap.scope == "user":
        return "you"
    if cap.scope == "agent":
        return f"the agent {agent}"
    return f"this place ({place_key(origin)})"
