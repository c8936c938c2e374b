"""How much a model can read (runtime/providers/models.py): context sizes by the longest
model-name prefix, and the window a request may fill, room kept for the reply."""

from __future__ import annotations

import pytest

from runtime.providers.models import UNKNOWN_CONTEXT, context_size, context_window


@pytest.mark.parametrize(("model", "size"), [
    ("claude-sonnet-4-5", 200_000), ("claude-3-5-haiku-latest", 200_000),
    ("gpt-4o-mini", 128_000), ("gpt-4.1-mini", 1_047_576), ("openai/gpt-4o", 128_000),
    ("gpt-4", 8_192), ("gpt-4-0613", 8_192), ("gpt-4-turbo-2024-04-09", 128_000),
    ("gpt-3.5-turbo", 16_385), ("o1-mini", 128_000), ("o3-mini", 200_000),
    ("GPT-4O", 128_000), ("llama3.1:8b", UNKNOWN_CONTEXT), ("", UNKNOWN_CONTEXT),
])
def test_context_sizes(model: str, size: int) -> None:
    assert context_size(model) == size


def test_the_window_leaves_room_for_the_reply() -> None:
    assert context_window("gpt-4", None) == int((8_192 - 4_096) * 0.9)
    assert context_window("gpt-4", 1_000) == int((8_192 - 1_000) * 0.9)
    assert context_window("tiny", 10**6) == 1_000  # never nothing
