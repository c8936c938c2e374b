"""The tools a model may call: how one is declared (``@tool``) and run, the registry that
offers them, running a command and isolating it, and MCP servers' tools (``.mcp``,
loaded only when one is configured)."""

from .base import (
    NOT_DONE,
    CancelFlag,
    Effect,
    Tool,
    ToolContext,
    ToolOutput,
    ToolSpec,
    error_result,
    tool,
)
from .keeping import Keeper, Keeping
from .prelude import Opening, Prelude

__all__ = [
    "NOT_DONE",
    "CancelFlag",
    "Effect",
    "Keeper",
    "Keeping",
    "Opening",
    "Prelude",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolSpec",
    "error_result",
    "tool",
]
