"""Model providers: one interface, several wire formats."""

from .anthropic import AnthropicProvider
from .base import ModelRequest, ModelResponse, Provider, TextSink
from .echo import EchoProvider
from .http import Retry
from .openai import OpenAIProvider
from .scripted import ScriptedProvider, ScriptedTurn

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
