"""The OpenAI wire (``/v1/chat/completions``, ``/v1/models``): the agent for any OpenAI
SDK or chat UI, on the same runtime as the rest of the API (README "OpenAI-compatible
API"). ``wire``: the shapes; ``threads``: which thread a request continues; ``chat``: the
routes."""

from .chat import router

__all__ = ["router"]
