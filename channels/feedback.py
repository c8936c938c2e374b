"""A click on the 👍 / 👎 under an answer, for every chat channel: the channel's rules
decide whether the person may rate answers there (``talk``), then the runtime records the
vote once per person per run (a change of mind replaces it). Who clicked is the platform's
word (a signed or gateway-delivered interaction), never the button's: a button names only
its run, and a run that did not answer in this channel cannot be voted on from it."""

from __future__ import annotations

import logging
from typing import Literal

from runtime import RunError, Runtime

from .access import Access, Place
from .prompts import refusal_text

__all__ = ["THANKS", "record_vote"]

log = logging.getLogger("maiden.feedback")

THANKS = {"up": "Thanks, noted: 👍 this answer helped.",
          "down": "Thanks, noted: 👎 this answer did not help."}


async def record_vote(runtime: Runtime, access: Access,
                      vote: tuple[Literal["up", "down"], str], *, channel: str, user: str,
                      place: Place, message: str | None) -> tuple[str, bool]:
    """The line to tell the person, and whether it is news to them (False: the same vote
    again, already recorded)."""
    value, run_id = vote
    if not access.allows(user, place, "talk"):
        return refusal_text("rate answers"), True
    try:
        _, changed = await runtime.feedback.vote(
            run_id, value, user=user, channel=channel,
            place=place.ids[0] if place.ids else None, message=message)
    except RunError as exc:
        log.info("%s: a vote from %s was refused: %s", channel, user, exc)
        return f"That did not work: {exc}", True
    return THANKS[value], changed
