"""``[[agents]]`` and ``[[providers]]``: several agents in one agent.toml.

An ``[[agents]]`` table takes ``[agent]``'s keys (each left out is ``[agent]``'s), its
model (a ``[[providers]]`` entry by name, or its own ``[agents.provider]``; else
``[provider]``), the tools it may use, and its per-run ``[agents.budget]``.
"""

from __future__ import annotations

from pydantic import Field

from .budget import BudgetConfig
from .config import AGENT_NAME, AgentConfig, BuiltinTool, ProviderConfig

__all__ = ["PROCESS_WIDE", "AgentEntry", "ProviderEntry"]


PROCESS_WIDE = ("timezone", "max_message_chars")
"""``[agent]`` keys that hold for the whole process, not per agent."""


class ProviderEntry(ProviderConfig):
    """One ``[[providers]]`` table: a provider agents name (``provider = "NAME"``)."""

    name: str = Field(pattern=AGENT_NAME,
                      description="unique; what an [[agents]] table's provider names")


class AgentEntry(AgentConfig):
    """One ``[[agents]]`` table: ``[agent]``'s keys (those left out are ``[agent]``'s),
    the agent's model, the tools it may use and its per-run budget."""

    name: str = Field(pattern=AGENT_NAME, description="unique; also its model id over HTTP")
    default: bool = Field(default=False, description="answers where no route matches "
                          "(else the first agent)")
    description: str = Field(default="", description="a line for `maiden check` and /v1/models")
    provider: str | ProviderConfig | None = Field(default=None, description=(
        "a [[providers]] name, or an [agents.provider] table; left out: [provider]"))
    tools: list[str] | None = Field(default=None, description=(
        "tool names it may use (modules', schedule tools, an MCP tool's full name)"))
    builtins: list[BuiltinTool] | None = Field(
        default=None, description="built-ins it may use (of those in [tools] builtins)")
    mcp_servers: list[str] | None = Field(
        default=None, description="[[mcp_servers]] whose tools it may use")
    budget: BudgetConfig | None = Field(default=None, description=(
        "its per-run [agents.budget] (keys left out are [budget]'s)"))

    def settings(self, base: AgentConfig) -> AgentConfig:
        """Its ``[agent]`` settings: those it sets over ``base``'s."""
        given = {k: getattr(self, k) for k in self.model_fields_set
                 if k in AgentConfig.model_fields}
        return AgentConfig.model_validate({**base.model_dump(), **given})

    @property
    def restricted(self) -> bool:
        """Whether it names the tools it may use (else it may use every one)."""
        return not (self.tools is None and self.builtins is None and self.mcp_servers is None)
