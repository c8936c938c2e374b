"""Model providers: one interface, several wire formats.

The HTTP providers are in their own modules (``.anthropic``, ``.openai``, ``.http``):
importing them loads httpx, which commands that never talk to a model API skip.
"""

from __future__ import annotations

from .base import ModelRequest, ModelResponse, Provider, TextSink
from .echo import EchoProvider
from .scripted import ScriptedProvider, ScriptedTurn

__all__ = [
    "EchoProvider",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ScriptedProvider",
    "ScriptedTurn",
    "TextSink",
]
