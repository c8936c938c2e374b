"""Two agents on one runtime, for the tests of agents and of spend caps: ``support`` (its
tools limited to ``lookup``, its budget given) and ``eng`` (every tool), routed by place
and thread prefix, each with a ``Model`` that remembers what it was asked."""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    BudgetConfig,
    ModelRequest,
    ModelResponse,
    Origin,
    Prices,
    RouteConfig,
    ToolRegistry,
    ToolView,
    Usage,
    tool,
)
from runtime.model.entries import ToolCall
from runtime.providers.base import TextSink

__all__ = ["Model", "deploy", "lookup", "slack", "two_agents"]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(effect="non_idempotent")
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


@dataclass
class Model:
    """A model that remembers what it was asked (prompt, tools) and answers under its own
    name, spending ``usage`` per turn; with ``call``, its first turn calls that tool."""

    name: str
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=100, output_tokens=50))
    call: str | None = None
    asked: list[ModelRequest] = field(default_factory=list)

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        self.asked.append(request)
        if self.call is not None and len(self.asked) == 1:
            return ModelResponse(tool_calls=(ToolCall(id=f"c{len(self.asked)}", name=self.call,
                                                      arguments={"key": "k"}),),
                                 usage=self.usage, model=self.name)
        return ModelResponse(text=f"{self.name} answers", usage=self.usage, model=self.name)


def two_agents(support: Model, eng: Model, *, routes: tuple[RouteConfig, ...] = (),
               **budget: float) -> Agents:
    shared = ToolRegistry([lookup, deploy])
    return Agents([
        Agent(AgentConfig(name="support", system_prompt="You are careful support."), support,
              ToolView(shared, lambda name: name == "lookup"), BudgetConfig(**budget),
              Prices(input=1_000.0, output=1_000.0)),
        Agent(AgentConfig(name="eng", system_prompt="You are an engineer."), eng, shared,
              prices=Prices(input=1_000.0, output=1_000.0)),
    ], routes or (RouteConfig(place="C_ENG", agent="eng"),
                  RouteConfig(thread_prefix="eng-", agent="eng")))


def slack(channel: str, user: str = "U1") -> Origin:
    return Origin(channel="slack", target={"channel": channel}, user=user, place=(channel,))
