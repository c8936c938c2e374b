"""The files store's format (runtime/stores/files/snapshot.py), pure: a thread's snapshot
round-trips, anything unreadable is ``CorruptStore`` naming the file, ``store.json`` names
the format this code reads, and runs are listed in SQLite's order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime import Run, RunState
from runtime.errors import CorruptStore, StoreError
from runtime.stores.files.snapshot import (
    FORMAT,
    Snapshot,
    check_marker,
    marker,
    parse_snapshot,
    select_runs,
)

PATH = Path("/data/files/threads/t-t.json")
S = RunState


def _raw(**changes: Any) -> bytes:
    raw = {"format": FORMAT, "thread_id": "t", "created_at": 1, "updated_at": 2,
           "entries": [{"kind": "user"}], "runs": {"r": {"inserted": 0}},
           "transitions": [], "deliveries": []}
    return json.dumps(raw | changes).encode()


def test_a_snapshot_round_trips_whatever_its_thread_id() -> None:
    lone = "x\ud800y"  # a lone surrogate: a str, not UTF-8
    snap = Snapshot(thread_id=lone, created_at=1.0, updated_at=2.0,
                    entries=[{"kind": "user", "text": "é"}])
    back = parse_snapshot(PATH, snap.dump(), lone)
    assert back == snap
    assert parse_snapshot(PATH, _raw(), None).entries == [{"kind": "user"}]


@pytest.mark.parametrize(("data", "why"), [
    (b"", "Expecting value"),
    (b"\xff\xfe", "unreadable thread snapshot"),
    (b"[]", "not a format 1 thread snapshot"),
    (_raw(format=2), "not a format 1 thread snapshot"),
    (_raw(thread_id=7), "thread_id is not a string"),
    (_raw(runs=[]), "runs is not an object of objects"),
    (_raw(runs={"r": 1}), "runs is not an object of objects"),
    (_raw(entries={}), "must be lists of objects"),
    (_raw(deliveries=["x"]), "must be lists of objects"),
    (_raw(created_at="soon"), "could not convert"),
    (json.dumps({"format": 1, "thread_id": "t"}).encode(), "created_at"),
])
def test_an_unreadable_snapshot_is_corrupt_naming_its_file(data: bytes, why: str) -> None:
    with pytest.raises(CorruptStore, match="unreadable thread snapshot") as corrupt:
        parse_snapshot(PATH, data, "t")
    assert str(corrupt.value).startswith(f"{PATH}: ") and why in str(corrupt.value)


def test_a_snapshot_of_another_thread_is_corrupt() -> None:
    with pytest.raises(CorruptStore, match=re.escape(f"{PATH} holds thread 't', not 'u'")):
        parse_snapshot(PATH, _raw(), "u")


def test_the_stores_marker_names_its_format_and_identity() -> None:
    store_json = Path("/data/files/store.json")
    assert check_marker(store_json, marker("id-1")) == "id-1"
    assert check_marker(store_json, b'{"format": 1}') is None  # made before identities
    with pytest.raises(StoreError, match="/data/files has format 99; this maiden reads "
                                         "format 1"):
        check_marker(store_json, b'{"format": 99}')
    for bad in (b"{", b"[1]"):
        with pytest.raises(CorruptStore, match=r"store\.json: unreadable"):
            check_marker(store_json, bad)


def test_runs_are_listed_in_sqlites_order() -> None:
    runs = {n: Run(id=f"r{n}", thread_id="t", text="hi", state=state) for n, state in
            enumerate((S.COMPLETED, S.QUEUED, S.FAILED, S.QUEUED))}
    pairs = [((2.0, 0), runs[2]), ((1.0, 1), runs[1]), ((1.0, 0), runs[0]),
             ((3.0, 0), runs[3])]
    assert [r.id for r in select_runs(pairs, None, None)] == ["r0", "r1", "r2", "r3"]
    assert [r.id for r in select_runs(pairs, [S.QUEUED], None)] == ["r1", "r3"]
    assert [r.id for r in select_runs(pairs, None, 2)] == ["r2", "r3"]  # the newest two
    assert select_runs(pairs, None, 0) == []
    assert len(select_runs(pairs, None, -1)) == 4  # as SQLite reads a negative LIMIT
