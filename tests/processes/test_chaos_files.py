"""The chaos soak's files in and out (chaos/files.py, chaos/files_checks.py), without
running a soak: the plan's draw, and invariant 7 on records made by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from chaos.files import FILES, REPORT, report_data, report_name
from chaos.files_checks import check_files
from chaos.invariants import Stored
from chaos.plan import Op, make_plan
from chaos.workload import Sent

THREAD = "discord:1:42"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _one(tmp_path: Path, *, uploads: int, shown: bool, state: str = "completed"
         ) -> tuple[dict[str, Sent], Stored, Path, Any]:
    """A Discord message carrying ``notes.txt`` and asking for a report, its run in
    ``state``; the bot uploaded the report ``uploads`` times; the model was ``shown`` it."""
    op = Op(at=0, tag="m80000", thread="discord/1/c0", person="ana", route="discord",
            replica=0, steps=[["look"], [REPORT]], files=["notes.txt"])
    sent = {op.tag: Sent(op, key=op.tag, thread=THREAD, accepted_at=0.0)}
    runs = [{"run_id": "r1", "text": op.text, "state": state, "thread_id": THREAD}]
    log = tmp_path / "model.jsonl"
    text = FILES["notes.txt"].decode() if shown else ""
    log.write_text(json.dumps({"tag": op.tag, "turn": 0, "messages": [
        {"role": "user", "content": [{"type": "text", "text": op.text},
                                     {"type": "text", "text": text}]}]}) + "\n")
    upload = {"author": {"id": "1"}, "content": "answer to m80000: 2 results",
              "attachments": [{"filename": report_name(op.tag)}]}
    fake = SimpleNamespace(messages=lambda c: [upload] * uploads if c == "42" else [])
    return sent, Stored(runs, {}, [], {}, [], set()), log, fake


def test_a_report_uploaded_once_and_a_file_shown_and_stored_is_clean(tmp_path: Path) -> None:
    sent, stored, log, fake = _one(tmp_path, uploads=1, shown=True)
    blobs = [_digest(FILES["notes.txt"]), _digest(report_data("m80000"))]
    plan = make_plan(1, 30, "sqlite", 1)
    assert check_files(plan, sent, stored, blobs, log, None, fake) == []


def test_a_report_twice_a_file_unseen_and_a_blob_missing_or_twice_are_violations(
        tmp_path: Path) -> None:
    sent, stored, log, fake = _one(tmp_path, uploads=2, shown=False)
    blobs = [_digest(report_data("m80000"))] * 2
    found = check_files(make_plan(1, 30, "sqlite", 1), sent, stored, blobs, log, None, fake)
    assert [v.invariant for v in found] == [7] * 4
    assert [v.what.split(":")[0] for v in found] == [
        f"blob {blobs[0][:12]} stored 2 times", "m80000", "m80000", "m80000 (completed)"]


def test_a_run_that_did_not_complete_may_have_no_report_but_never_two(tmp_path: Path) -> None:
    for uploads, violations in ((0, 0), (1, 0), (2, 1)):
        sent, stored, log, fake = _one(tmp_path, uploads=uploads, shown=False,
                                       state="cancelled")
        plan = make_plan(1, 30, "sqlite", 1)
        assert len(check_files(plan, sent, stored, [], log, None, fake)) == violations


def test_files_are_drawn_from_a_stream_of_their_own() -> None:
    plan = make_plan(7, 120, "postgres", 3)
    carried = [o for o in plan.ops if o.files]
    assert carried and all(o.route in ("http", "slack", "discord") for o in carried)
    assert {f for o in carried for f in o.files} == set(FILES)
    assert not any(o.files or [REPORT] in o.steps for o in plan.ops if o.tag >= "m90000")
