"""A reference chat channel: the smallest deliverer that keeps the outbox's contract.

Messages live in a list, each with the delivery key it carried (as Slack message
metadata or a Discord nonce would). ``fail`` makes the next send fail before or
after posting, as a dropped connection does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from runtime import ApprovalDelivery, Delivery

__all__ = ["MemoryChat", "Posted"]


@dataclass(frozen=True)
class Posted:
    id: str
    key: str
    kind: str
    text: str
    target: dict[str, str] = field(default_factory=dict)


class MemoryChat:
    """A ``Deliverer`` over a list of posted messages."""

    def __init__(self, max_chars: int | None = 500) -> None:
        self.max_chars = max_chars
        self.posted: list[Posted] = []
        self.fail: Literal["before", "after"] | None = None

    async def send(self, delivery: Delivery) -> str:
        if self.fail == "before":
            self.fail = None
            raise ConnectionError("channel down")
        text = delivery.text
        if isinstance(delivery, ApprovalDelivery):
            text = f"Approve? {delivery.text} [Approve] [Deny]"
        if self.max_chars is not None and len(text) > self.max_chars:
            raise ValueError(f"message of {len(text)} characters over the limit")
        message = Posted(id=f"m{len(self.posted) + 1}", key=delivery.key, kind=delivery.kind,
                         text=text, target=dict(delivery.target))
        self.posted.append(message)
        if self.fail == "after":
            self.fail = None
            raise TimeoutError("posted, but the answer never came back")
        return message.id

    async def reconcile(self, delivery: Delivery) -> str | None:
        return next((m.id for m in self.posted if m.key == delivery.key), None)
