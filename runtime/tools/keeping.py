"""A tool's keeper: what it keeps of a thread's older entries as they fall out of the
context window (the ``memory`` built-in's flush: statements kept as thread memories).

With ``compaction = "summary"``, before the summary of what falls out is asked for, the
engine asks the model once what of it is worth keeping (``engine.flush``) and hands the
statements to each tool that has a keeper. A keeper writes each statement under its own
idempotency key (``Keeping.call``), derived from the thread and the compaction point: the
flush re-run after a crash (the summary not yet committed) writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.runs import Origin
from .needs import needed

__all__ = ["Keeper", "Keeping"]


@dataclass(frozen=True, slots=True)
class Keeping:
    """What a keeper knows: the statements the model chose, and the run it was asked in."""

    run_id: str
    thread_id: str
    agent: str
    """The name of the agent that answers the run."""
    origin: Origin
    at: float
    statements: tuple[str, ...]
    """What is worth keeping of the entries that fall out, a short statement each."""
    key: str
    """The flush's idempotency key (``flush:{thread}:{since}:{covers}``): the same for a
    flush re-run after a crash."""
    services: Mapping[str, Any] = field(default_factory=dict)
    """The runtime's services the tool ``needs``, by name (as ``ToolContext``'s)."""

    def call(self, n: int) -> str:
        """The idempotency key of the ``n``-th statement's write."""
        return f"{self.key}:{n}"

    def service(self, name: str) -> Any:
        """The service ``name``; ``ToolFailure`` if the tool did not declare it."""
        return needed(self.services, name, "keeper")


Keeper = Callable[[Keeping], Awaitable[int]]
"""A tool's keeper: keeps the statements; how many it wrote (0 for a flush re-run)."""
