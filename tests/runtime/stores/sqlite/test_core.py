"""The SQLite store's core (runtime/stores/sqlite/core.py): opens that fail cleanly, naming
the path and leaving no thread behind, and a close that lets what was handed in land."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.errors import StoreError
from runtime.model.runs import Run
from runtime.serving.control import Instance
from runtime.stores.sqlite import SQLiteStore


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    return folder


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("not a folder")
    return tmp_path / "a-file" / "maiden.db"


def _root(tmp_path: Path) -> Path:
    return Path("/")


def _newer_schema(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    db.commit()
    db.close()
    return path


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("the folder stays writable (running as root)")
        yield folder / "maiden.db"
    finally:
        folder.chmod(stat.S_IRWXU)


BAD_PATHS: dict[str, Callable[[Path], Path]] = {
    "a folder": _folder,
    "under a regular file": _under_a_file,
    "the root folder": _root,
    "a newer schema": _newer_schema,
}


async def _assert_open_fails_cleanly(path: Path) -> StoreError:
    before = threading.active_count()
    store = SQLiteStore(path)
    with pytest.raises(StoreError) as raised:
        await store.open()
    assert str(path) in str(raised.value)
    assert threading.active_count() == before, [t.name for t in threading.enumerate()]
    with pytest.raises(StoreError, match="the store is not open"):
        await store.get_run("r")
    return raised.value


@pytest.mark.parametrize("make", BAD_PATHS.values(), ids=BAD_PATHS.keys())
async def test_a_failed_open_names_the_path_and_leaves_no_thread(
    make: Callable[[Path], Path], tmp_path: Path
) -> None:
    await _assert_open_fails_cleanly(make(tmp_path))


async def test_opening_in_a_read_only_folder_fails_cleanly(read_only_folder: Path) -> None:
    await _assert_open_fails_cleanly(read_only_folder)


async def test_a_newer_schema_is_named(tmp_path: Path) -> None:
    error = await _assert_open_fails_cleanly(_newer_schema(tmp_path))
    assert "schema version 99" in str(error)


def test_nothing_runs_after_the_loop_of_a_failed_open_is_gone(tmp_path: Path) -> None:
    before = threading.active_count()
    for make in BAD_PATHS.values():
        (tmp_path / make.__name__).mkdir()
        with pytest.raises(StoreError):
            asyncio.run(SQLiteStore(make(tmp_path / make.__name__)).open())
    assert threading.active_count() == before


async def test_close_twice_and_use_after_close(tmp_path: Path) -> None:
    before = threading.active_count()
    store = SQLiteStore(tmp_path / "m.db")
    await store.open()
    assert threading.active_count() == before + 2  # the writer's thread and the reader's
    await store.close()
    await store.close()
    assert threading.active_count() == before
    with pytest.raises(StoreError, match="the store is not open"):
        await store.load_entries("t")
    with pytest.raises(StoreError, match="the store is not open"):
        await store.beat(Instance(id="i", pid=1, host="h", started_at=0.0, beat_at=0.0))
    await store.open()  # and it opens again
    assert await store.instances() == []
    await store.close()


async def test_close_lets_the_checkpoints_handed_in_land(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    await store.open()
    creates = [asyncio.ensure_future(store.create_run(Run(id=f"{i:032d}", thread_id=f"t{i}",
                                                          text="hi")))
               for i in range(20)]
    await asyncio.sleep(0)  # handed in
    await store.close()
    assert len(await asyncio.gather(*creates)) == 20
    async with SQLiteStore(tmp_path / "m.db") as reopened:
        assert len(await reopened.list_runs()) == 20
