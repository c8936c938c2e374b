"""A button acts only on its own run, in its own place (DESIGN §6), for every chat channel.

A button's value (Slack) or ``custom_id`` (Discord) names a run and a call, and nothing
stops such a value from turning up on another message: one the bot posted elsewhere,
carrying another run's value. So the value is not taken on its word. The outbox records
where each approval prompt and each answer was posted (the delivery's target channel and
the platform's message id); a click counts only on the message recorded for that run's
prompt of that call (or its answer, for a vote), and the rights are judged at the run's
own place, not the clicking channel's. No key to keep: the lookup is the binding.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from runtime import ApprovalDelivery, Delivery, NotFound, ReplyDelivery, Run, Runtime

from .access import Access, Place, Right
from .prompts import refusal_text

__all__ = ["FOREIGN", "UNSENT", "Bound", "Click", "bind", "run_place", "verdict"]

log = logging.getLogger("maiden.clicks")

FOREIGN = "That button does not belong to this message, so it did nothing."
UNSENT = "That message is still being recorded; try again in a moment."

Verdict = Literal["own", "unsent", "foreign"]

_WHAT: dict[Right, str] = {"approve": "decide approvals", "talk": "rate answers",
                           "operate": "operate runs"}


@dataclass(frozen=True, slots=True)
class Click:
    """A button clicked on a message, as the platform reports it (never the button's word)."""

    via: str
    """The channel's name (``slack``, ``discord``)."""
    user: str
    channel: str
    """The platform's id of the channel (or Discord thread) holding the clicked message."""
    message: str
    """The clicked message's id (Slack ``ts``, Discord snowflake)."""
    place: Place
    """Where the click came from, as the platform names it."""


@dataclass(frozen=True, slots=True)
class Bound:
    """A click found to be on its run's own message, by someone with the right there."""

    run: Run
    place: Place
    """The run's own place, where the rights were judged."""


def verdict(deliveries: Iterable[Delivery], channel: str, message: str, *,
            kind: Literal["approval", "reply"], call: str | None = None) -> Verdict:
    """Whether ``message`` in ``channel`` is one of the run's own: its prompt for ``call``
    (None: any of its prompts), or its answer (the reply carrying the 👍 / 👎). ``unsent``:
    such a delivery is written for this channel but its message id is not recorded yet."""
    mine = [d for d in deliveries if _carries_buttons(d, kind, call)
            and d.target.get("channel") == channel]
    if any(d.remote_id and message in d.remote_id.split(",") for d in mine):
        return "own"
    if any(not d.remote_id for d in mine):
        return "unsent"
    return "foreign"


def _carries_buttons(delivery: Delivery, kind: Literal["approval", "reply"],
                     call: str | None) -> bool:
    if kind == "reply":
        return isinstance(delivery, ReplyDelivery) and delivery.feedback
    return isinstance(delivery, ApprovalDelivery) and call in (None, delivery.tool_call_id)


def run_place(run: Run, clicked: Place) -> Place:
    """Where a run's rights are judged: the place its message came from. A run whose origin
    names none (a schedule's) is judged where its message was posted, ``clicked`` once
    ``verdict`` has shown that the click is on that message."""
    if run.origin.place:
        return Place(run.origin.place, run.origin.direct)
    return clicked


async def bind(runtime: Runtime, access: Access, click: Click, run_id: str, *,
               right: Right, call: str | None = None) -> Bound | str:
    """The run ``run_id`` if ``click`` is on its own message and the person holds ``right``
    at its place; else the one line to tell them. With ``right = "approve"`` the message is
    the prompt for ``call`` (None: the run's pending call, else any of its prompts, so a
    stale one is told so by the runtime); otherwise its answer."""
    try:
        run = await runtime.records.get_run(run_id)
    except NotFound:
        run = None
    if run is not None and right == "approve" and call is None and run.pending_approval:
        call = run.pending_approval.tool_call_id
    found: Verdict = "foreign"
    if run is not None and run.origin.channel == click.via:
        found = verdict(await runtime.records.deliveries(run_id=run.id), click.channel,
                        click.message, kind="approval" if right == "approve" else "reply",
                        call=call)
    if found == "unsent":
        log.info("%s: %s clicked run %s's message before its id was recorded; asked to "
                 "try again", click.via, click.user, run_id)
        return UNSENT
    if run is None or found != "own":
        log.warning("%s: refused %s's click naming run %s on message %s in %s: not that "
                    "run's message", click.via, click.user, run_id, click.message,
                    click.channel)
        return FOREIGN
    place = run_place(run, click.place)
    if not access.allows(click.user, place, right):
        log.info("%s: %s may not %s at run %s's place", click.via, click.user, right, run.id)
        return refusal_text(_WHAT[right])
    return Bound(run, place)
