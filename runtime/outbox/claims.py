"""Who sends a record: the store's claim on it, taken just before each send.

A process's belief that it may send a record (its own run's, or with the thread's lease)
lives in its memory, and a process starved past its lease still holds it while another
replica has taken the thread over (chaos finding 23: an answer posted twice). So each send
first claims its record in the store, in one step (``OutboxStore.claim_delivery``), and a
record another live process claimed a moment ago is left to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..model.runs import Delivery
from ..stores.base import Store

__all__ = ["CLAIM_TTL_S", "Claims", "never_gone"]

log = logging.getLogger("maiden.delivery")

CLAIM_TTL_S = 60.0
"""How long a record claimed for its send stays its sender's: another process takes it
over after that (reconciling first), or at once if the sender is a process of this machine
that no longer exists. Longer than any send takes, Slack's and Discord's pacing included;
a sender killed mid-send on another machine delays its record by as much."""


def never_gone(sender: str) -> bool:
    return False


class Claims:
    """This process's claims, as ``sender`` (its lease holder name); ``gone`` says whether
    another claim's sender is a process known to be gone (``is_gone_here``)."""

    def __init__(self, store: Store, sender: str, gone: Callable[[str], bool],
                 clock: Callable[[], float]) -> None:
        self._store = store
        self._sender = sender
        self._gone = gone
        self._clock = clock

    async def take(self, delivery: Delivery, what: str) -> Delivery | None:
        """The record claimed for this process's send, as the store has it now (sent
        already, perhaps); None while another process is sending it."""
        claimed = await self._store.claim_delivery(delivery.key, self._sender, self._clock(),
                                                   CLAIM_TTL_S)
        if claimed.remote_id is None and claimed.sender != self._sender:
            other = claimed.sender or ""
            if not self._gone(other):
                log.info("run %s's %s is being sent by %s; left to it", delivery.run_id,
                         what, other)
                return None
            claimed = await self._store.claim_delivery(
                delivery.key, self._sender, self._clock(), CLAIM_TTL_S, steal_from=other)
            if claimed.remote_id is None and claimed.sender != self._sender:
                return None
            log.info("run %s's %s: its sender %s is gone; reconciling first",
                     delivery.run_id, what, other)
        return claimed
