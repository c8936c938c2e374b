"""A tool's prelude: what it puts before a run's first model turn, unasked (the ``memory``
built-in's recall of what bears on the new message).

The engine asks each tool that has one as a run starts, and commits what they say with the
run's message, in the run's first checkpoint: written once, never asked again (not at a
later turn, not on resume or after a crash), so a run's prompt is the same however often
its process dies. A prelude that fails or is slow is left out; the run goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.entries import Entry, Notice
from ..model.runs import Origin
from .needs import needed

__all__ = ["Opening", "Prelude"]


@dataclass(frozen=True, slots=True)
class Opening:
    """What a prelude knows: the run about to ask the model for its first turn."""

    run_id: str
    thread_id: str
    agent: str
    """The name of the agent that answers it."""
    text: str
    """The person's message."""
    origin: Origin
    at: float
    window: int | None = None
    """The model's context window, in tokens, when known (a prelude keeps to a share)."""
    idempotency_key: str | None = None
    """The run's idempotency key (a chat message's identity), if it has one."""
    thread: Sequence[Entry] = ()
    """The thread as loaded for the run (at least what the context window holds), before
    its message: what the model will see already (a prelude need not say it again)."""
    services: Mapping[str, Any] = field(default_factory=dict)
    """The runtime's services the tool ``needs``, by name (as ``ToolContext``'s)."""

    def service(self, name: str) -> Any:
        """The service ``name``; ``ToolFailure`` if the tool did not declare it."""
        return needed(self.services, name, "prelude")


Prelude = Callable[[Opening], Awaitable[Notice | None]]
"""A tool's prelude: the notice to put before the run's first turn, or None for nothing."""
