"""What a channel implements to be posted to exactly once (``Deliverer``, and
``Uploader`` for files), and the sending of one outbox record through it: part by part
(``deliver``), or as a file (``upload``), reconciled first unless it is fresh."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from ..errors import NotFound
from ..model.runs import Delivery, FileDelivery, ReplyDelivery
from ..model.text import split_message
from ..stores.base import OutboxStore, Store

__all__ = ["Deliverer", "UploadStarted", "Uploader", "deliver", "parts", "upload"]

log = logging.getLogger("maiden.delivery")


class Deliverer(Protocol):
    """What a channel implements so the runtime can post to it exactly once.

    Every message carries its delivery's ``key`` where the channel can give it back
    (Slack message metadata, a Discord nonce), so ``reconcile`` can tell whether a
    send whose answer was lost (a crash, a dropped connection) reached the channel.

    Long replies: a channel whose messages have a length limit sets ``max_chars``.
    The outbox then cuts a longer reply with ``split_message`` into parts and hands
    each to ``send`` as a delivery of its own, with key ``{key}:{i}`` (i = 1..n) and
    the part's text, in order: part i+1 only once part i is posted. After a crash,
    each part is reconciled by its own key, so only missing parts are posted, still
    in order. A reply that fits is sent whole, under its own key. Approval prompts
    are never cut (``send`` renders them to fit).
    """

    max_chars: int | None
    """The channel's message length limit, or None for none."""

    async def send(self, delivery: Delivery) -> str:
        """Post the delivery to ``delivery.target``, carrying ``delivery.key``; return the
        channel's message id. ``ApprovalDelivery``: post the prompt with its buttons."""
        ...

    async def reconcile(self, delivery: Delivery) -> str | None:
        """Look for a message already posted with ``delivery.key``; its id, or None."""
        ...


UploadStarted = Callable[[str], Awaitable[None]]
"""What an ``Uploader`` awaits with the platform's id for an upload before completing it:
the outbox records the id (``FileDelivery.upload_id``) and flushes it to disk."""


@runtime_checkable
class Uploader(Deliverer, Protocol):
    """A deliverer that can send a file (``FileDelivery``) as a file, into the target's
    thread. A deliverer without it gets the file's line (``FileDelivery.text``) through
    ``send``.

    A platform that uploads in steps (Slack: an id and an upload URL, the bytes, then
    completing the upload, which shares it) awaits ``started`` with the upload's id before
    completing it, as a stream's ids are recorded as soon as the platform returns them.
    After a crash ``reconcile`` asks the platform about ``delivery.upload_id`` (Slack: is
    that file shared in the target?), never by time; if it is not there, ``upload`` is
    called with the id still in ``delivery.upload_id`` and completes that upload rather
    than making another. A one-step platform carries the delivery's key instead (Discord:
    the message nonce) and ignores ``started``.
    """

    async def upload(self, delivery: FileDelivery, data: bytes, started: UploadStarted
                     ) -> str:
        """Upload ``data`` as ``delivery.file`` to ``delivery.target``; the platform's id."""
        ...


async def upload(store: Store, deliverer: Uploader, delivery: FileDelivery, *,
                 fresh: bool) -> str:
    """Send one file (reconciled first unless ``fresh``) and record its id. A file no
    longer in the store (pruned) is named in a message instead."""
    remote_id = None if fresh else await deliverer.reconcile(delivery)
    if remote_id is None:
        try:
            data = await store.get_blob(delivery.file.digest)
        except NotFound:
            remote_id = await deliverer.send(delivery)
        else:
            remote_id = await deliverer.upload(delivery, data,
                                               functools.partial(store.upload_started,
                                                                 delivery.key))
    else:
        log.info("file %s was already uploaded as %s", delivery.key[:14], remote_id)
    await store.mark_delivered(delivery.key, remote_id, time.time())
    return remote_id


def parts(delivery: Delivery, max_chars: int | None) -> list[Delivery]:
    """The messages ``delivery`` is posted as (see ``Deliverer``): itself, or its parts."""
    if not isinstance(delivery, ReplyDelivery) or max_chars is None \
            or len(delivery.text) <= max_chars:
        return [delivery]
    texts = split_message(delivery.text, max_chars) or [delivery.text[:max_chars]]
    return [delivery.model_copy(update={"key": f"{delivery.key}:{i}", "text": text,
                                        "feedback": delivery.feedback and i == len(texts)})
            for i, text in enumerate(texts, 1)]


async def deliver(
    store: OutboxStore, deliverer: Deliverer, delivery: Delivery, *, fresh: bool
) -> str:
    """Send one delivery (part by part) and record its message id(s), comma-separated.

    ``fresh`` means this process wrote the record and has not tried to send it: no
    earlier attempt can have reached the channel, so there is nothing to reconcile.
    Otherwise (recovery, a retry) the channel is asked first, part by part.
    """
    ids = []
    for part in parts(delivery, deliverer.max_chars):
        remote_id = None if fresh else await deliverer.reconcile(part)
        if remote_id is None:
            remote_id = await deliverer.send(part)
        else:
            log.info("delivery %s was already posted as %s", part.key[:14], remote_id)
        ids.append(remote_id)
    remote = ",".join(ids)
    await store.mark_delivered(delivery.key, remote, time.time())
    return remote
