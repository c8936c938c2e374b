"""A click on the 👍 / 👎 under an answer, for every chat channel: the click counts only on
the run's own answer (``clicks.bind``), the channel's rules decide whether the person may
rate answers at the run's place (``talk``), then the runtime records the vote once per
person per run (a change of mind replaces it). Who clicked is the platform's word (a
signed or gateway-delivered interaction), never the button's: a button names only its
run, and a run's value on another message votes nothing."""

from __future__ import annotations

import logging
from typing import Literal

from runtime import RunError, Runtime, StoreError

from .access import Access
from .clicks import Click, bind

__all__ = ["THANKS", "UNRECORDED", "record_vote"]

log = logging.getLogger("maiden.feedback")

THANKS = {"up": "Thanks, noted: 👍 this answer helped.",
          "down": "Thanks, noted: 👎 this answer did not help."}
UNRECORDED = "Your vote could not be recorded just now; please click again in a moment."


async def record_vote(runtime: Runtime, access: Access,
                      vote: tuple[Literal["up", "down"], str], click: Click
                      ) -> tuple[str, bool]:
    """The line to tell the person, and whether it is news to them (False: the same vote
    again, already recorded)."""
    value, run_id = vote
    try:
        bound = await bind(runtime, access, click, run_id, right="talk")
        if isinstance(bound, str):
            return bound, True
        _, changed = await runtime.kept.feedback.vote(
            run_id, value, user=click.user, channel=click.via,
            place=bound.place.ids[0] if bound.place.ids else None, message=click.message)
    except RunError as exc:
        log.info("%s: a vote from %s was refused: %s", click.via, click.user, exc)
        return f"That did not work: {exc}", True
    except StoreError as exc:  # out of reach a moment, or its disk full: said, not lost
        log.warning("%s: a vote from %s could not be recorded: %s", click.via, click.user,
                    exc)
        return UNRECORDED, True
    return THANKS[value], changed
