"""How far a schedule's fires got, as the store records it (``SlotMark``): what one fire
decided, and two fires' marks made one, so the store only ever moves a record forward;
what a fire claimed (``Fired``), and the key of a run asked for by hand."""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from runtime import Run, SlotMark, kept_skips

__all__ = ["Fired", "decided", "later", "manual_key"]

log = logging.getLogger("maiden.schedules")


def decided(name: str, since: datetime, fired: list[tuple[datetime, Run]],
            missed: list[datetime], held_back: list[datetime], blocked: str | None,
            misfire: str) -> SlotMark:
    """The mark of one fire of ``name``: decided up to ``since``, its newest claimed slot
    and run (``fired``, oldest first), its newest slot held back by ``overlap = "skip"``
    (``overlap = "skip"``, or a slot that cannot run) and why; the missed and held-back
    slots are logged once here."""
    if fired:
        log.info("schedule %r: %s", name, ", ".join(
            f"{slot.isoformat()} -> run {run.id}" for slot, run in fired))
    if missed:
        log.warning("schedule %r: %d missed slot(s) not run (misfire = %r), the latest %s",
                    name, len(missed), misfire, missed[-1].isoformat())
    skips = [(slot.timestamp(), f"missed: maiden was not running at its time, and misfire "
              f"= {misfire!r} did not run it") for slot in missed]
    skips += [(slot.timestamp(), f"skipped: {blocked}") for slot in held_back]
    mark = SlotMark(name=name, since=since.timestamp(), skips=kept_skips(tuple(skips)))
    if held_back:
        log.warning("schedule %r: slot %s skipped: %s", name, held_back[-1].isoformat(),
                    blocked)
        mark = mark.model_copy(update={"skipped_slot": held_back[-1].timestamp(),
                                       "skipped_why": blocked})
    if fired:
        slot, run = fired[-1]
        mark = mark.model_copy(update={"last_slot": slot.timestamp(), "last_run_id": run.id})
    return mark


def later(a: SlotMark, b: SlotMark) -> SlotMark:
    """Two marks of one schedule as one: the later ``since``, the newer slot, the newer
    skipped slot."""
    newest = b if a.last_slot is None or (b.last_slot or 0.0) > a.last_slot else a
    skipped = b if a.skipped_slot is None or (b.skipped_slot or 0.0) > a.skipped_slot else a
    return newest.model_copy(update={"since": max(a.since, b.since),
                                     "skipped_slot": skipped.skipped_slot,
                                     "skipped_why": skipped.skipped_why,
                                     "skips": kept_skips(a.skips, b.skips)})


@dataclass(frozen=True, slots=True)
class Fired:
    """A slot claimed: the run that holds its key (a new one, or the one a previous claim
    made)."""

    schedule: str
    slot: datetime
    key: str
    run: Run


def manual_key(name: str, request: str | None = None) -> str:
    """``schedule:{name}:manual:{id}``: a run asked for by hand, outside the slots; its id
    from ``request`` (the asking's identity), or new."""
    made = hashlib.sha256(request.encode()).hexdigest()[:12] if request else \
        uuid.uuid4().hex[:12]
    return f"schedule:{name}:manual:{made}"
