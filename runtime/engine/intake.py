"""What makes a message a run: the checks ``submit`` and ``send`` make before anything is
stored (pure: tested in ``tests/runtime/engine/test_intake.py``)."""

from __future__ import annotations

from ..errors import InvalidThreadId, RunError
from ..model.attachments.refs import FileRef, FileSource
from ..model.jobs import Job
from ..model.runs import Origin, Run, Said, new_run_id
from ..stores.base import check_thread_id

__all__ = ["new_run"]


def new_run(thread_id: str, text: str, origin: Origin | None, idempotency_key: str | None,
            *, max_chars: int, now: float, files: tuple[FileRef, ...] = (),
            fetch: tuple[FileSource, ...] = (), context: tuple[Said, ...] = (),
            agent: str = "", job: Job | None = None) -> Run:
    """The queued run of a message, or why it is refused: an empty or unsafe thread id
    (``InvalidThreadId``), an empty message (no text and no file), or one over
    ``max_chars`` when the origin has no target to answer (``RunError("invalid_message")``)."""
    check_thread_id(thread_id)
    if not thread_id:
        raise InvalidThreadId("a thread id cannot be empty")
    if not text.strip() and not files and not fetch:
        raise RunError("invalid_message", "the message is empty")
    if len(text) > max_chars and not (origin and origin.target):
        raise RunError("invalid_message", f"the message has {len(text):,} characters; at "
                       f"most {max_chars:,} are accepted ([agent] max_message_chars)")
    # A too long message from a chat channel is stored like any other (so Slack gets its
    # ack and its retries find the run) and its run fails at once with a reply that says
    # so: the outbox posts that notice exactly once (RunDriver._begin).
    # Only what differs from the defaults is set: a run's row holds the fields set
    # (``run_json``), and the message's are most of them.
    given = {name: value for name, value in (
        ("origin", origin), ("idempotency_key", idempotency_key), ("files", files),
        ("fetch", fetch), ("context", context), ("agent", agent), ("job", job)) if value}
    return Run(id=new_run_id(now), thread_id=thread_id, text=text, created_at=now,
               updated_at=now, **given)
