"""The files store's disk (runtime/stores/files/fs.py): a file replaced all at once, no
temp file left on success or failure, stale temp files of a crashed writer removed and
fresh ones kept, and a lock held by another writer refused after its time."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

import pytest

from runtime.errors import StoreError
from runtime.stores.files.fs import flock, read_or_none, remove_stale_temp_files, write_atomic


@pytest.mark.parametrize("fsync", [True, False])
def test_a_file_is_replaced_all_at_once(tmp_path: Path, fsync: bool) -> None:
    path = tmp_path / "t-a.json"
    assert read_or_none(path) is None
    write_atomic(path, b"first", fsync=fsync)
    write_atomic(path, b"second", fsync=fsync)
    assert read_or_none(path) == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["t-a.json"]  # no temp file left


def test_a_failed_replace_keeps_the_old_file_and_leaves_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-a.json"
    write_atomic(path, b"old", fsync=False)

    def crash(src: object, dst: object) -> None:
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_atomic(path, b"new", fsync=True)
    monkeypatch.undo()
    assert read_or_none(path) == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["t-a.json"]


def test_only_a_crashed_writers_temp_files_are_removed(tmp_path: Path) -> None:
    threads, runs = tmp_path / "threads", tmp_path / "runs"
    threads.mkdir()
    runs.mkdir()
    old, fresh = threads / ".t-x.json.00.tmp", runs / ".r-y.01.tmp"
    kept = threads / "t-x.json"
    for path in (old, fresh, kept):
        path.write_bytes(b"x")
    os.utime(old, (0, 0))
    os.utime(kept, (0, 0))  # old, but not a temp file
    remove_stale_temp_files([threads, runs, tmp_path / "missing"])
    assert not old.exists() and fresh.exists() and kept.exists()


def test_a_lock_another_writer_holds_is_refused_after_its_time(tmp_path: Path) -> None:
    path = tmp_path / "t-a.lock"
    with flock(path, timeout_s=1):
        fd = os.open(path, os.O_RDWR)  # another writer's open file description
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with flock(path, timeout_s=1):  # let go once the block is left
        pass
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(StoreError, match=re.escape(
                f"{path}: still locked by another writer after 0.05 s")), \
                flock(path, timeout_s=0.05):
            pass
    finally:
        os.close(fd)
