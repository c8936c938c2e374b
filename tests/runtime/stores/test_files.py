"""The files backend's own guarantees (beside the contract every backend passes): temp files
left by a crash, a failed flush of a folder, a snapshot's thread id, an interrupted request
(the file names threads get: ``files/test_names.py``; its open: ``files/test_core.py``;
torn and foreign snapshots: ``files/test_folders.py``)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import StoreError, StoreGone
from runtime.model.entries import Notice
from runtime.serving.control import ControlRequest
from runtime.stores.base import Checkpoint
from runtime.stores.files import FilesStore, thread_file_name
from tests.runtime.stores.contract import started

# -- the files backend's own guarantees


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FilesStore]:
    async with FilesStore(tmp_path / "files") as opened:
        yield opened


async def test_leftover_temp_files_are_ignored(files: FilesStore, tmp_path: Path) -> None:
    run = await started(files)
    threads = tmp_path / "files" / "threads"
    name = thread_file_name("t")
    (threads / f".{name}.json.0123456789abcdef.tmp").write_bytes(b'{"format": 1, "entr')
    (threads / ".garbage.tmp").write_bytes(b"\xff\x00")
    (tmp_path / "files" / "runs" / ".r-x.deadbeef.tmp").write_bytes(b"")
    async with FilesStore(tmp_path / "files") as reopened:
        assert len(await reopened.load_entries("t")) == 1
        assert [info.id for info in await reopened.list_threads()] == ["t"]
        assert await reopened.get_run(run.id) == run
        await reopened.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="y")]))
    assert len(await files.load_entries("t")) == 2


async def test_a_crash_before_the_rename_keeps_the_old_snapshot(
    files: FilesStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await started(files)
    snapshot = tmp_path / "files" / "threads" / f"{thread_file_name('t')}.json"
    before = snapshot.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError, match="simulated crash"):
        await files.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="lost")]))
    monkeypatch.undo()
    assert snapshot.read_bytes() == before
    # What a kill -9 would leave: a half-written temp file that was never renamed.
    (snapshot.parent / f".{snapshot.name}.feedfacecafebeef.tmp").write_bytes(before[:10])
    async with FilesStore(tmp_path / "files") as reopened:
        assert len(await reopened.load_entries("t")) == 1
        await reopened.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="ok")]))
        assert len(await reopened.load_entries("t")) == 2


async def test_a_failed_flush_of_a_folder_loses_the_store(
    files: FilesStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a rename, the folder is flushed; if that fails (EIO), readers see the new file
    but whether the disk has it is unknown, and a later flush that succeeds would not say
    so. Not tried again: the store is lost, as for a deleted folder."""
    run = await started(files)
    real = os.fsync
    failures: list[int] = []

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode) and not failures:
            failures.append(fd)
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StoreGone, match="a flush of the folder to disk failed"):
        await files.commit(Checkpoint("t", 1, [Notice(run_id=run.id, code="x", text="one")]))
    assert "restart maiden" in (files.gone() or "")
    with pytest.raises(StoreGone):  # the disk answers again: refused all the same
        await files.commit(Checkpoint("t", 2, [Notice(run_id=run.id, code="x", text="two")]))
    with pytest.raises(StoreGone):
        await started(files, "u")
    assert len(failures) == 1


async def test_a_snapshot_records_its_thread_id(files: FilesStore, tmp_path: Path) -> None:
    long_id = "x" * 10_000
    await started(files, thread_id=long_id)
    path = tmp_path / "files" / "threads" / f"{thread_file_name(long_id)}.json"
    data = json.loads(path.read_bytes())
    assert data["format"] == 1
    assert data["thread_id"] == long_id
    assert len(data["entries"]) == 1


@pytest.mark.parametrize("fail_at", [1, 2])
async def test_an_interrupted_add_request_leaves_nothing_to_carry_out(
    files: FilesStore, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    # add_request writes two files (the request, the id counter); the process may die
    # between them. The asker never got an id, so no server may act on the request,
    # and the next request must not take over its id.
    replace, calls = os.replace, 0

    def interrupted(src: Any, dst: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == fail_at:
            raise OSError(5, "simulated crash")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(StoreError, match="simulated crash"):
        await files.add_request(ControlRequest(kind="cancel", run_id="lost", created_at=1.0))
    monkeypatch.undo()
    assert await files.requests() == []
    kept = await files.add_request(ControlRequest(kind="cancel", run_id="kept", created_at=2.0))
    assert await files.requests() == [kept]
    assert (await files.get_request(kept.id)).run_id == "kept"
