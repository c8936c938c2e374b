"""What the control plane stores (runtime/model/requests.py): a thread's key in news
between processes, and schedule records moved only forward by a fire's ``SlotMark``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runtime.model.requests import (
    SKIPS_KEPT,
    ControlRequest,
    ScheduleRecord,
    SlotMark,
    Vote,
    thread_key,
)


@pytest.mark.parametrize("thread_id", ["", "t", "slack:T1/C1/1712345678.000100",
                                       "é" * 5000, "a\nb\x00c"])
def test_a_thread_key_is_short_plain_and_of_one_length(thread_id: str) -> None:
    key = thread_key(thread_id)
    assert len(key) == 24 and key.isascii() and key.isalnum()
    assert key == thread_key(thread_id)  # every process names a thread alike


def test_threads_have_keys_of_their_own() -> None:
    ids = ["t", "T", "t ", "slack:a", "slack:b", ""]
    assert len({thread_key(i) for i in ids}) == len(ids)


def _record(**fields: Any) -> ScheduleRecord:
    return ScheduleRecord(**{"name": "daily", "origin": "config", "since": 10.0} | fields)


@pytest.mark.parametrize(("stored", "mark", "expected"), [
    # A newer slot moves the record on, with the run that it started.
    ({"last_slot": 10.0, "last_run_id": "r1"},
     {"since": 20.0, "last_slot": 20.0, "last_run_id": "r2"},
     {"since": 20.0, "last_slot": 20.0, "last_run_id": "r2"}),
    # An older mark (a replica firing from an old copy) takes nothing back.
    ({"since": 30.0, "last_slot": 30.0, "last_run_id": "r3"},
     {"since": 20.0, "last_slot": 20.0, "last_run_id": "r2"},
     {"since": 30.0, "last_slot": 30.0, "last_run_id": "r3"}),
    # Slots decided without a run: only ``since`` moves.
    ({"last_slot": 10.0, "last_run_id": "r1"}, {"since": 40.0},
     {"since": 40.0, "last_slot": 10.0, "last_run_id": "r1"}),
    # A first slot on a record that never ran.
    ({}, {"since": 10.0, "last_slot": 5.0, "last_run_id": "r0"},
     {"since": 10.0, "last_slot": 5.0, "last_run_id": "r0"}),
    # A skipped slot, and why, move forward the same way, apart from the run slot.
    ({"skipped_slot": 15.0, "skipped_why": "old"},
     {"since": 10.0, "skipped_slot": 12.0, "skipped_why": "older"},
     {"skipped_slot": 15.0, "skipped_why": "old"}),
    ({"skipped_slot": 15.0, "skipped_why": "old"},
     {"since": 10.0, "skipped_slot": 18.0, "skipped_why": "awaiting approval"},
     {"skipped_slot": 18.0, "skipped_why": "awaiting approval"}),
])
def test_a_mark_moves_a_record_forward_never_back(
        stored: dict[str, Any], mark: dict[str, Any], expected: dict[str, Any]) -> None:
    record = _record(**stored, paused=True, spec={"cron": "0 9 * * *"})
    moved = SlotMark(name="daily", **mark).applied(record)
    assert moved == record.model_copy(update=expected)
    assert moved.paused and moved.spec == {"cron": "0 9 * * *"}  # not the mark's to change


def test_a_mark_that_changes_nothing_hands_back_the_record_itself() -> None:
    record = _record(since=30.0, last_slot=30.0)
    assert SlotMark(name="daily", since=5.0, last_slot=5.0).applied(record) is record


def test_a_record_saved_over_the_stored_one_keeps_its_definition_and_the_newer_slots() -> None:
    stored = _record(since=50.0, last_slot=50.0, last_run_id="r5", paused=False,
                     spec={"every": "1h"})
    # Read before another replica's fire at 50, then paused and saved.
    saving = _record(since=20.0, last_slot=20.0, last_run_id="r2", paused=True,
                     spec={"every": "2h"})
    saved = saving.over(stored)
    assert saved.paused and saved.spec == {"every": "2h"}
    assert (saved.since, saved.last_slot, saved.last_run_id) == (50.0, 50.0, "r5")
    assert saving.over(None) is saving


@pytest.mark.parametrize(("model", "fields"), [
    (ControlRequest, {"kind": "delete", "run_id": "r"}),
    (ControlRequest, {"kind": "cancel", "run_id": "r", "by": "ann"}),
    (Vote, {"run_id": "r", "user": "u", "value": "meh", "thread_id": "t",
            "channel": "slack"}),
    (ScheduleRecord, {"name": "n", "origin": "chat"}),  # since is required
])
def test_records_refuse_what_they_do_not_hold(model: type[Any], fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        model(**fields)


def test_the_skipped_slots_a_record_keeps_grow_forward_and_stay_bounded() -> None:
    record = ScheduleRecord(name="tick", origin="config", since=0.0)
    first = SlotMark(name="tick", since=10.0, skips=((5.0, "skipped: busy"),)).applied(record)
    assert first.skips == ((5.0, "skipped: busy"),)
    # Another replica's fire decided the same slot with another reason: the first stands.
    again = SlotMark(name="tick", since=10.0, skips=((5.0, "missed"), (7.0, "missed")))
    assert again.applied(first).skips == ((5.0, "skipped: busy"), (7.0, "missed"))
    many = SlotMark(name="tick", since=1000.0,
                    skips=tuple((float(s), "missed") for s in range(100, 200)))
    kept = many.applied(first).skips
    assert len(kept) == SKIPS_KEPT and kept[-1] == (199.0, "missed") and kept[0][0] == 150.0
    # A definition saved over the stored record (a pause) keeps what fires recorded.
    paused = first.model_copy(update={"paused": True, "skips": ()}).over(first)
    assert paused.paused and paused.skips == first.skips
