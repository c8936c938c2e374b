"""The outbox: replies are written with the final answer and sent after (DESIGN §5)."""

from __future__ import annotations

import logging
import time
from typing import Protocol

from .runs import Delivery
from .stores.base import Store

__all__ = ["Deliverer", "deliver"]

log = logging.getLogger("maiden.delivery")


class Deliverer(Protocol):
    """What a channel implements so the runtime can post replies exactly once."""

    async def send(self, delivery: Delivery) -> str:
        """Post ``delivery.text`` to ``delivery.target``, carrying ``delivery.key``;
        return the channel's message id."""

    async def reconcile(self, delivery: Delivery) -> str | None:
        """Look for a message already posted with ``delivery.key``; its id, or None."""


async def deliver(store: Store, deliverer: Deliverer, delivery: Delivery, *, fresh: bool) -> str:
    """Send one delivery and record its remote id.

    ``fresh`` means this process wrote the record and has not tried to send it:
    no earlier attempt can have reached the channel, so there is nothing to
    reconcile. Otherwise (recovery) the channel is asked first, and the reply is
    sent only if it is really missing.
    """
    remote_id = None if fresh else await deliverer.reconcile(delivery)
    if remote_id is None:
        remote_id = await deliverer.send(delivery)
    else:
        log.info("delivery %s was already posted as %s", delivery.key[:12], remote_id)
    await store.mark_delivered(delivery.key, remote_id, time.time())
    return remote_id
