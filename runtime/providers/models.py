"""How much a model can read: context sizes of the common models, for the default window.

The window sent to a model is its context size minus room for the reply. Sizes are the
vendors' published input limits, matched by model-name prefix (longest first); a model
not in the table gets ``UNKNOWN_CONTEXT``, deliberately small, and ``[agent]
max_context_tokens`` overrides all of it. Token counts in maiden are estimates (about four
characters a token), so the window keeps a margin (``SAFETY``) below the real limit.
"""

from __future__ import annotations

__all__ = ["CONTEXT_SIZES", "SAFETY", "UNKNOWN_CONTEXT", "context_size", "context_window"]

CONTEXT_SIZES: dict[str, int] = {
    # Anthropic
    "claude-": 200_000,
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-": 8_192,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1-mini": 128_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
}
UNKNOWN_CONTEXT = 32_000
"""For a model not in the table (a local server's, a new one): small enough for most."""
SAFETY = 0.9
"""The share of what is left that the window fills: estimates are not exact counts."""
REPLY_ROOM = 4_096
"""Tokens kept for the reply when ``max_output_tokens`` is not set."""


def context_size(model: str) -> int:
    """The model's context size in tokens, from the table (longest prefix wins)."""
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" on a compatible server
    for prefix in sorted(CONTEXT_SIZES, key=len, reverse=True):
        if name.startswith(prefix):
            return CONTEXT_SIZES[prefix]
    return UNKNOWN_CONTEXT


def context_window(model: str, max_output_tokens: int | None) -> int:
    """How many tokens of prompt (system, tools, history) a request to ``model`` may hold."""
    room = max_output_tokens or REPLY_ROOM
    return max(1_000, int((context_size(model) - room) * SAFETY))
