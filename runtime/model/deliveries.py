"""Deliveries: what a run puts in the outbox for a channel to post (a reply, an approval
prompt, a reply's stream, a file), and the one adapter their records go through."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from .attachments.refs import FileRef
from .guards import canonical_json

__all__ = [
    "DELIVERY",
    "NOT_POSTED",
    "ApprovalDelivery",
    "Delivery",
    "FileDelivery",
    "ReplyDelivery",
    "StreamDelivery",
    "StreamState",
]


NOT_POSTED = "-"
"""The ``remote_id`` of a delivery that is done with nothing posted: a stream that opened no
message, a prompt or closing words that the run had moved past before they could be sent
(``Outbox``: superseded)."""


class _Delivery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    """The idempotency key the channel carries with the message (Slack metadata, a
    Discord nonce), so a recovered send can find out whether it already happened."""
    run_id: str
    thread_id: str
    channel: str
    target: dict[str, str] = Field(default_factory=dict)
    remote_id: str | None = None
    created_at: float = Field(default_factory=time.time)
    delivered_at: float | None = None
    attempts_failed: int = 0
    last_error: str | None = None
    """Why the last send failed (it stays in the outbox and is tried again)."""
    sender: str | None = None
    """The process sending it (a lease holder's name), claimed in the store just before the
    send (``OutboxStore.claim_delivery``); once sent, the one that sent it."""
    sending_since: float | None = None
    """When ``sender`` claimed it (by its clock)."""

    @property
    def posted(self) -> bool:
        """Whether its message was posted: a remote id, and not ``NOT_POSTED``."""
        return self.remote_id is not None and self.remote_id != NOT_POSTED


class ReplyDelivery(_Delivery):
    """A message for the run's origin: the final answer, or why the run stopped."""

    kind: Literal["reply"] = "reply"
    text: str
    answer: bool = True
    """The run's own reply, which finishes its stream; False for a message a tool posts
    (``send_message``)."""
    feedback: bool = False
    """The message carries 👍 / 👎 buttons for ``run_id`` where the channel has them (a
    completed run's answer; of a reply cut into parts, the last)."""


class ApprovalDelivery(_Delivery):
    """The prompt for a paused call, written in the pause's checkpoint; channels render it
    with Approve / Deny buttons bound to ``run_id``, ``tool_call_id`` and ``arguments_hash``."""

    kind: Literal["approval"] = "approval"
    tool_call_id: str
    name: str
    arguments: Any = None
    arguments_hash: str
    reason: str
    """``requires_approval`` or ``uncertain_side_effect``."""
    asked_by: str | None = None

    @property
    def text(self) -> str:
        """A plain rendering, for channels without buttons."""
        why = "may have run already before a crash" if self.reason == "uncertain_side_effect" \
            else "needs approval"
        return f"{self.name} {canonical_json(self.arguments)} {why}."


class FileDelivery(_Delivery):
    """A file a tool handed back, sent with the run's answer (after it), exactly once:
    uploaded by a deliverer that can (``Uploader``), else named in a message."""

    kind: Literal["file"] = "file"
    file: FileRef
    upload_id: str | None = None
    """The platform's id for the upload, recorded as soon as the platform gives it and
    before the upload is completed (Slack: the file id ``files.getUploadURLExternal``
    returns; a file is invisible until completed). After a crash the upload is looked for,
    or completed, by this id; with none recorded nothing was shown, so it is uploaded."""

    @property
    def text(self) -> str:
        """A plain rendering, for channels that cannot take files."""
        return f"📎 {self.file.describe()}"


StreamState = Literal["opening", "streaming", "finished"]


class StreamDelivery(_Delivery):
    """A reply shown while it is written (DESIGN §5): recorded ``opening`` before the
    platform is asked to open it, ``streaming`` with the ids of every message it opened
    as soon as the platform returns them, ``finished`` (and ``remote_id`` set) once the
    reply it shows is final. After a crash the same messages are finished, never a
    second reply: the run's ``ReplyDelivery`` finishes its stream instead of posting."""

    kind: Literal["stream"] = "stream"
    state: StreamState = "opening"
    remote_ids: tuple[str, ...] = ()
    """The platform ids of the messages it opened, in order (Slack: one ``ts``; Discord:
    one message per 2,000 characters)."""

    @property
    def text(self) -> str:
        return ""


def _delivery_kind(value: Any) -> str:
    # Records written before deliveries had kinds are replies.
    if isinstance(value, dict):
        return str(value.get("kind", "reply"))
    return str(getattr(value, "kind", "reply"))


Delivery = Annotated[
    Annotated[ReplyDelivery, Tag("reply")] | Annotated[ApprovalDelivery, Tag("approval")]
    | Annotated[StreamDelivery, Tag("stream")] | Annotated[FileDelivery, Tag("file")],
    Discriminator(_delivery_kind),
]
"""An outbox record (DESIGN §5): a reply, an approval prompt, a reply's stream, or a file
sent with a reply."""

DELIVERY: TypeAdapter[Delivery] = TypeAdapter(Delivery)
"""The one adapter delivery records are (de)serialised through."""
