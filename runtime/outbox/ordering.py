"""When an outbox record goes: pure rules, no I/O (``Outbox`` and ``LiveReplies`` ask them
with what the store holds).

A record is sent after the checkpoint that wrote it, and sometimes late: its channel was
not up (``maiden run`` finishes unfinished runs before it opens its channels), its send
failed, or the platform's pacing held it. Two things follow.

A thread's messages must still reach each place in the order of its runs: a newer run's
reply waits for the older ones (``holds_back``), and is not streamed while one of them is
not sent (``waits_behind``): a stream would show it first.

And the run may have gone on meanwhile: a person decided the call a prompt asks about
(through the HTTP API, say), or a run that stopped was taken up again. Posted then, such a
record would say what is no longer so, offer buttons for a decided call, and end the
stream of the run's next answer with its stale note (``superseded``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import NotFound
from ..model.decisions import awaits_decision
from ..model.runs import ApprovalDelivery, Delivery, ReplyDelivery, Run, StreamDelivery
from ..stores.base import Store

__all__ = ["ORDER_HOLD_S", "Place", "holds_back", "in_run_order", "place", "superseded",
           "waits_behind"]

ORDER_HOLD_S = 120.0
"""How long a record left in the outbox keeps the later ones of its thread (to the same
place) waiting behind it. One that cannot go now (its send failed, its channel is not up
here, another live process owns it) holds back those after it; for a while only, so that
a message the platform keeps refusing cannot silence the conversation. Twice a send's
claim (``claims.CLAIM_TTL_S``): a record claimed by a process that stalls mid-send is
taken over and sent before the ones after it give up waiting (chaos, seed 8080: answers
overtaken by the next ones while a stalled replica held the first's claim)."""

Place = tuple[str, str]
"""What order is kept within: a thread's messages to one channel. Not to one target: a
channel's target can name more than where the message goes (Slack's names the person a
stream is for, so the runs of one Slack thread asked by two people have two)."""


def place(delivery: Delivery) -> Place:
    return delivery.thread_id, delivery.channel


def holds_back(delivery: Delivery, now: float) -> bool:
    """Whether ``delivery``, left in the outbox, keeps the later records of its place
    waiting: while it is younger than ``ORDER_HOLD_S``."""
    return now - delivery.created_at < ORDER_HOLD_S


def waits_behind(run: Run, pending: Sequence[Delivery], now: float) -> bool:
    """Whether the run's reply waits for messages of the thread's earlier runs to its
    channel that are not sent yet (``pending``: the thread's records not sent; those that
    hold it back): then it is not streamed, and is posted whole when the run ends, after
    them."""
    here = (run.thread_id, run.origin.channel)
    return any(d.run_id != run.id and not isinstance(d, StreamDelivery)
               and place(d) == here and holds_back(d, now) for d in pending)


def superseded(delivery: Delivery, run: Run, records: Sequence[Delivery]) -> str | None:
    """Why ``delivery`` is not to be posted any more, or None: the run has moved past it.

    A prompt whose call the run no longer waits on (decided meanwhile, through the HTTP
    API say, or asked about again since), and closing words (why it stopped, failed or
    timed out) of an end the run has left (taken up again, or ended again since): posted
    late, they would say what is no longer so, and offer buttons for a decided call. Its
    answer and what a tool posts are never superseded. ``records``: the run's outbox
    records, in order."""
    at = next((i for i, d in enumerate(records) if d.key == delivery.key), len(records))
    later = records[at + 1:]
    if isinstance(delivery, ApprovalDelivery):
        pending = run.pending_approval
        if not awaits_decision(run) or pending is None \
                or pending.tool_call_id != delivery.tool_call_id:
            return f"the run no longer waits for a decision on {delivery.name} (run {run.state})"
        if any(isinstance(d, ApprovalDelivery) for d in later):
            return "the run asked again since"
        return None
    if isinstance(delivery, ReplyDelivery) and delivery.answer:
        if not run.terminal:
            return f"the run went on after it (run {run.state})"
        if any(isinstance(d, ReplyDelivery) and d.answer for d in later):
            return "the run ended again since"
    return None


async def in_run_order(store: Store, records: list[Delivery]) -> list[Delivery]:
    """``records`` (as the store lists them, by the time each was written) in the order
    their runs arrived in their threads, each run's in the store's order: a record's time is
    its writer's clock, which may be behind another replica's (chaos: two answers of a
    Discord thread swapped, the later one's replica 3 s behind), while a thread's runs are
    stamped in the order they arrived (``arriving_after``)."""
    runs = {d.run_id for d in records}
    if len(runs) < 2:
        return records
    arrived: dict[str, float] = {}
    for run_id in runs:
        try:
            arrived[run_id] = (await store.get_run(run_id)).created_at
        except NotFound:  # erased meanwhile: where its records were
            arrived[run_id] = min(d.created_at for d in records if d.run_id == run_id)
    ranked = sorted(enumerate(records), key=lambda p: (arrived[p[1].run_id], p[0]))
    return [d for _, d in ranked]
