"""Model providers: one interface, several wire formats."""

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
