"""What the model is shown of a tool: the part of a tool that providers, the context
window and the loop need, without the tool itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is shown of a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
