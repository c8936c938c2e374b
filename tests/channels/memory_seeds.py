"""Memories planted through the runtime's ``memories`` service, as the ``remember`` tool
would keep them (the tests of ``/maiden memory``, ``/v1/memories`` and the console)."""

from __future__ import annotations

from runtime import Memory, Runtime
from runtime.model.memories import MemoryScope, Provenance, Writer

EVERY_RIGHT = Writer(agent="main", rights=frozenset({"talk", "approve", "operate"}))


def said(channel: str, user: str, place: str | None, thread_id: str, *,
         private: bool = False) -> Provenance:
    """Said by ``user`` (a platform id: ``U1``) on ``channel`` at ``place``, now-ish."""
    return Provenance(user=f"{channel}:{user}", channel=channel, place=place,
                      private=private, thread_id=thread_id, run_id="r-planted", at=1.0)


async def plant(runtime: Runtime, text: str, scope: MemoryScope, source: Provenance
                ) -> Memory:
    """Keep ``text`` learned at ``source`` (written with every right: the tests are of who
    sees and forgets it, not of who may write it)."""
    kept = await runtime.kept.memories.remember(text, scope, source, EVERY_RIGHT)
    assert kept is not None
    return kept
