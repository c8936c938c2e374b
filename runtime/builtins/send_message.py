"""``send_message``: post text to a channel target ("post this summary to #team").

``non_idempotent`` (a post is not undone by posting again), so it goes through the
outbox under the call's idempotency key, with a ``reconcile`` hook: after a crash the
recovery asks the outbox, which knows whether the message was posted (its message id),
asks the channel by key when it does not, and posts only what is missing. So a crash
never double-posts, and never silently drops the message either.
"""

from __future__ import annotations

from typing import Any

from ..model.runs import TARGET_FORMS, ReplyDelivery, parse_target
from ..outbox.delivery import Sender
from ..tools.base import NOT_DONE, Tool, ToolContext, tool

__all__ = ["make_send_message"]

_MAX_CHARS = 40_000


def make_send_message() -> Tool:
    def sender(ctx: ToolContext) -> Sender:
        found: Sender = ctx.service("send")
        return found

    def answer(remote_id: str | None, target: str) -> dict[str, Any]:
        if remote_id is None:
            return {"queued": target, "note": "not posted yet (the channel is not connected "
                    "here, or it failed); maiden posts it as soon as it can - do not send "
                    "it again"}
        return {"sent": target, "message_id": remote_id}

    @tool(name="send_message", effect="non_idempotent", timeout_s=60, needs=["send"],
          description=f"Post `text` to a channel: `target` is {TARGET_FORMS}. Use it to "
          "post somewhere other than this conversation (your answer here is posted anyway).")
    async def send_message(ctx: ToolContext, target: str, text: str) -> dict[str, Any]:
        origin = parse_target(target.strip())
        if not sender(ctx).allows(origin.channel):
            raise ValueError(f"refused: {origin.channel} is not configured for this agent "
                             f"([channels.{origin.channel}])")
        if not text.strip():
            raise ValueError("the message is empty")
        if len(text) > _MAX_CHARS:
            raise ValueError(f"the message has {len(text):,} characters; at most "
                             f"{_MAX_CHARS:,}")
        delivery = ReplyDelivery(key=ctx.idempotency_key, run_id=ctx.run_id,
                                 thread_id=ctx.thread_id, channel=origin.channel,
                                 target=origin.target, text=text, answer=False)
        return answer(await sender(ctx).post(delivery), target)

    @send_message.reconcile
    async def _(ctx: ToolContext) -> Any:
        record = await sender(ctx).posted(ctx.run_id, ctx.idempotency_key)
        if record is None:
            return NOT_DONE  # the crash came before the message reached the outbox
        target = ":".join([record.channel, *record.target.values()])
        # In the outbox: posted (its id), or found at the channel by key, or posted now.
        assert isinstance(record, ReplyDelivery)
        return answer(await sender(ctx).post(record), target)

    return send_message
