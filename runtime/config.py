"""The runtime's sections of agent.toml, as pydantic models (the app composes the file)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AgentConfig",
    "ProviderConfig",
    "RuntimeConfig",
    "StoreConfig",
    "ToolsConfig",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are maiden, a careful assistant working for a team. Answer concisely. "
    "Use a tool only when it helps, and never repeat a call that already failed."
)


class Section(BaseModel):
    """A config section: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(Section):
    name: str = "maiden"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_turns: int = Field(default=12, ge=1, description="model turns one run may take")
    max_tool_calls_per_turn: int = Field(default=8, ge=1)
    repeat_limit: int = Field(default=3, ge=2,
                              description="the Nth identical consecutive call is refused")
    max_recovery_attempts: int = Field(default=3, ge=1,
                                       description="crashes survived before a run is poison")
    approvers: list[str] = Field(default_factory=list)


class ProviderConfig(Section):
    kind: Literal["echo", "scripted", "anthropic", "openai"] = "echo"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    script: str | None = Field(default=None,
                               description="scripted: a JSON file of turns, relative to the config")


class StoreConfig(Section):
    kind: Literal["sqlite", "files"] = "sqlite"
    path: str = Field(default="data/maiden.db",
                      description="relative paths are relative to the config file's folder")
    synchronous: Literal["off", "normal", "full", "extra"] = "full"


class RuntimeConfig(Section):
    concurrency: Literal["global", "thread"] = "global"


class ToolsConfig(Section):
    modules: list[str] = Field(default_factory=list,
                               description="modules next to the config with @tool functions")
    builtins: list[Literal["clock"]] = Field(default_factory=lambda: ["clock"])  # type: ignore[arg-type]
