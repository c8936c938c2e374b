"""What tests share to script a model (``ScriptedProvider``): a turn that calls a tool."""

from __future__ import annotations

from typing import Any

__all__ = ["call"]


def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted turn that calls ``tool_name`` with ``arguments`` (which may hold a
    ``name``: the tool's own argument)."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}
