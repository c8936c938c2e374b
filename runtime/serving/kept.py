"""What a runtime keeps for people and channels beside their runs (``Runtime.kept``): small
notes written once per call, the team's memories, votes on replies, and shared files."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.files import Files
from .feedback import Feedback
from .memories import Memories
from .notes import Notes

__all__ = ["Kept"]


@dataclass(frozen=True, slots=True)
class Kept:
    notes: Notes
    """Notes kept in the store by key, written once per call (who was told a refusal; the
    OpenAI wire's threads)."""
    memories: Memories
    """The team's memories, each with its scope and source, shown only where it may be."""
    feedback: Feedback
    """People's votes on replies (👍 / 👎), one per person per run."""
    files: Files
    """Files people share: stored once by content, fetched as a run's first step."""
