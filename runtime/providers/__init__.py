"""Model providers: one interface, several wire formats.

The HTTP providers (and httpx) load on first use, so commands that never talk to a
model API start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import ModelRequest, ModelResponse, Provider, TextSink
from .echo import EchoProvider
from .scripted import ScriptedProvider, ScriptedTurn

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .http import Retry
    from .openai import OpenAIProvider

_LAZY = {"AnthropicProvider": ".anthropic", "OpenAIProvider": ".openai", "Retry": ".http"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AnthropicProvider",
    "EchoProvider",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "Retry",
    "ScriptedProvider",
    "ScriptedTurn",
    "TextSink",
]
