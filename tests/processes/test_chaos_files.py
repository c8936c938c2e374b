"""The chaos soak's files in and out (chaos/files.py, chaos/files_checks.py), without
running a soak: the plan's draw, and invariant 7 on records made by hand."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.files import (
    FILES,
    FILES_TOML,
    OVER,
    REFUSED,
    REPORT,
    marker,
    media_type,
    refused,
    report_data,
    report_name,
)
from chaos.files_checks import check_files
from chaos.invariants import Stored
from chaos.plan import Op, make_plan
from chaos.sent import Sent
from runtime.engine.files import Files
from runtime.errors import FileRefused
from runtime.model.attachments import Seeing, TextPart, describe_blob, media_type_of, to_part
from runtime.model.config import FilesConfig
from tests.processes.test_chaos_quick import _discord_seen

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
    assert {f for o in carried for f in o.files} == set(FILES) | set(REFUSED) | set(OVER)
    assert not any(o.files or [REPORT] in o.steps for o in plan.ops if o.tag >= "m90000")


def test_the_later_files_come_from_a_stream_of_their_own(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr("chaos.plan.draw_last_files", lambda seed, plan: None)
    plan = make_plan(7, 300, "postgres", 3)
    monkeypatch.setattr("chaos.plan.draw_more_files", lambda seed, plan: None)
    before = make_plan(7, 300, "postgres", 3)
    changed = [(o.tag, b.files, o.files) for o, b in zip(plan.ops, before.ops, strict=True)
               if o != b]
    # Only a file added where there was none, and how a message's file goes.
    assert changed and all(not was or was == now for _, was, now in changed), changed
    assert all(dataclasses.replace(o, files=b.files, via="") == b
               for o, b in zip(plan.ops, before.ops, strict=True))
    vias = {(o.route, o.via) for o in plan.ops if o.files}
    assert {("http", "multipart"), ("http", "json"), ("http", "cli"), ("slack", "signin")} \
        <= vias, vias
    names = {n for o in plan.ops for n in o.files}
    assert {"brief.pdf", *REFUSED} <= names, names
    for op in plan.ops:
        if refused(op) or op.via == "cli":  # nothing to decide or cancel without a run
            assert op.decide is None and op.cancel_after_s is None, op


def test_maiden_reads_the_pdf_and_refuses_the_refused_files_under_the_soaks_limits() -> None:
    limits = FilesConfig.model_validate(tomllib.loads(FILES_TOML)["files"])
    for name in FILES:  # as Slack and Discord claim them, and as `maiden send` (no claim)
        for claimed in (media_type(name), None):
            limits_check(limits, name, media_type_of(claimed, name), len(FILES[name]))
    for name, data in REFUSED.items():
        with pytest.raises(FileRefused, match="max_bytes" if name == "dump.log" else "type"):
            limits_check(limits, name, media_type_of(media_type(name), name), len(data))
    ref = describe_blob(FILES["brief.pdf"], "brief.pdf", None, "d" * 64, text_tokens=10_000)
    part = to_part(ref, FILES["brief.pdf"], Seeing(images=True, pdfs=False))
    assert isinstance(part, TextPart) and marker("brief.pdf") in part.text


def limits_check(limits: FilesConfig, name: str, media: str, size: int) -> None:
    """``Files.check``, as maiden runs it on a file someone shares."""
    Files(None, limits, clock=time.time).check(name, media, size)  # type: ignore[arg-type]


def test_a_refused_file_is_turned_down_over_http_and_said_once_in_discord() -> None:
    http = Op(at=0, tag="m00001", thread="chaos/1/t00", person="ana", route="http",
              replica=0, steps=[], files=["setup.zip"], via="json")
    told: list[dict[str, Any]] = []
    people, sent, stored = _discord_seen({}, ["m80000"])
    sent["m80000"].op.files = ["dump.log"]
    sent["m00001"] = Sent(http, key="k", thread=http.thread,
                          turned_down='415 {"detail": "setup.zip: files of type …"}')
    fake = SimpleNamespace(world=people.fake.world, messages=lambda c: told)
    plan = make_plan(1, 10, "sqlite", 1)

    def found() -> list[str]:
        return [v.what for v in check_files(plan, sent, stored, [], None, None,
                                            fake)]  # type: ignore[arg-type]

    assert found() == ["m80000 (discord, dump.log): its run completed (started); its place "
                       "was told 0 time(s) it could not be read: []"]
    # The person's message, and the line answering it (a reply to it, as the deliverer
    # posts it); another message of the place that shared a file of that name, and its line.
    told.append({"id": "900", "author": {"id": "7"}, "content": "<@1> [m80000] ana asks"})
    line = {"author": {"id": "1"}, "content": "I could not read dump.log: it is 80 KB; …",
            "message_reference": {"message_id": "900"}}
    told.append(line)
    told.append({**line, "message_reference": {"message_id": "901"}})
    assert found() == []
    told.append(line)
    assert len(found()) == 1
    told.pop()
    sent["m00001"].turned_down = '413 {"detail": "the request body is too large"}'
    stored.runs.append({"run_id": "r1", "text": http.text, "state": "completed",
                        "thread_id": http.thread})
    assert [w.split(": ", 1)[1] for w in found()] == [
        "a message with a file refused made run r1 (completed)",
        "turned down, but not 415 naming the file: '413 {\"detail\": \"the request body is "
        "too large\"}'"]
