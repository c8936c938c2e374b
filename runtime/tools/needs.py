"""The runtime's services a tool declared it ``needs`` (``@tool(needs=...)``), as its call,
its prelude and its keeper are each handed them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ToolFailure

__all__ = ["needed"]


def needed(services: Mapping[str, Any], name: str, asker: str) -> Any:
    """The service ``name`` among ``services``; ``ToolFailure`` naming ``asker`` (``tool``,
    ``prelude``, ``keeper``) if the tool did not declare it or it is not there."""
    try:
        return services[name]
    except KeyError:
        raise ToolFailure(f"the service {name!r} is not available to this {asker} "
                          "(declare it: @tool(needs=...))") from None
