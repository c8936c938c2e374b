"""Agents: one runtime, several agents, each its own prompt, model, tools and budgets.

An ``Agent`` is what a run needs to be driven that differs by agent; the store, the
lock, the outbox and the workers are the runtime's and shared. A thread is answered by
one agent for its life: its first run is routed (``routing.py``) and every later run
takes the agent of the thread's newest run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..model.budget import BudgetConfig
from ..model.config import AgentConfig, Prices
from ..model.routing import RouteConfig, Where, route
from ..model.toolspec import ToolSpec
from ..providers.base import Provider
from ..tools.base import Tool
from ..tools.registry import ToolRegistry

__all__ = ["Agent", "Agents", "ToolView"]


class ToolView(ToolRegistry):
    """The tools of a shared registry that one agent may use: those ``allowed`` says
    yes to, looked at each time (an MCP server's tools come and go after start)."""

    def __init__(self, base: ToolRegistry, allowed: Callable[[str], bool]) -> None:
        super().__init__()
        self.base = base
        self.allowed = allowed

    def add(self, t: Tool) -> None:
        self.base.add(t)

    def replace(self, t: Tool) -> None:
        self.base.replace(t)

    def get(self, name: str) -> Tool | None:
        return self.base.get(name) if self.allowed(name) else None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.allowed(name) and name in self.base

    def __iter__(self) -> Iterator[Tool]:
        return (t for t in self.base if self.allowed(t.name))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self]

    def check_needs(self, provided: Iterable[str]) -> None:
        self.base.check_needs(provided)


@dataclass(frozen=True, slots=True)
class Agent:
    """One agent: its settings, model, tools and per-run budget."""

    config: AgentConfig
    provider: Provider
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    prices: Prices = field(default_factory=Prices)
    description: str = ""

    @property
    def name(self) -> str:
        return self.config.name


class Agents:
    """The agents of a runtime by name, the routes to them, and the default one."""

    def __init__(self, agents: Sequence[Agent], routes: Sequence[RouteConfig] = (),
                 default: str | None = None) -> None:
        if not agents:
            raise ValueError("a runtime needs at least one agent")
        self.by_name = {a.name: a for a in agents}
        if len(self.by_name) != len(agents):
            raise ValueError("two agents have the same name")
        self.default = self.by_name[default] if default is not None else agents[0]
        self.routes = tuple(routes)
        unknown = [r.agent for r in self.routes if r.agent not in self.by_name]
        if unknown:
            raise ValueError(f"a route names an agent that does not exist: {unknown[0]!r}")

    def __iter__(self) -> Iterator[Agent]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    def get(self, name: str) -> Agent | None:
        """The agent called ``name``; the default one for ``""`` (runs stored before
        there were several agents)."""
        return self.default if not name else self.by_name.get(name)

    def answering(self, name: str | None) -> Agent:
        """The agent that answers a run stored with agent ``name``: the default one for a
        run without one, or of an agent no longer configured."""
        return self.get(name or "") or self.default

    def route(self, where: Where) -> str:
        """The agent a new thread from ``where`` goes to."""
        return route(self.routes, where, self.default.name)
