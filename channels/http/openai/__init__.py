"""The OpenAI wire (``/v1/chat/completions``, ``/v1/responses``, ``/v1/models``): the
agent for any OpenAI SDK or chat UI, on the same runtime as the rest of the API
(docs/guides/openai-wire.md). ``wire``: the shapes; ``threads``: which thread a Chat
Completions request continues; ``answers``: what a run says back; ``chat`` and
``responses``: the routes."""

from fastapi import APIRouter

from .chat import router as chat
from .responses import router as responses

__all__ = ["router"]

router = APIRouter()
router.include_router(chat)
router.include_router(responses)
