"""A store's file overwritten in place (``cp backup.db data/maiden.db``: the same inode,
other bytes) is noticed at the next accepted message, as a deleted one is; a file written
by a checkpoint, this process's or another's, is not taken for one."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from runtime import Run, StoreGone
from runtime.stores import Checkpoint, FilesStore, SQLiteStore


def _run(thread_id: str, run_id: str) -> Run:
    return Run(id=run_id, thread_id=thread_id, text="hi", created_at=1.0, updated_at=1.0)


def _copy_over(source: Path, target: Path) -> None:
    """What ``cp source target`` does to an existing target: truncated and written again,
    the same inode."""
    inode = target.stat().st_ino
    with source.open("rb") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    assert target.stat().st_ino == inode


async def _sqlite_backup(tmp_path: Path, db: Path) -> Path:
    """A copy of ``db``'s file, taken with no process serving it (as a backup is)."""
    async with SQLiteStore(db) as store:
        await store.create_run(_run("a", "r0"))
    return Path(shutil.copyfile(db, tmp_path / "backup.db"))


async def _another_sqlite_store(tmp_path: Path, db: Path) -> Path:
    other = tmp_path / "other.db"
    async with SQLiteStore(other) as store:
        await store.create_run(_run("a", "r0"))
    return other


@pytest.mark.parametrize(("copy", "said"), [
    (_sqlite_backup, "it holds a copy of this store from before this process opened it"),
    (_another_sqlite_store, "it holds another store, identity "),
])
async def test_a_database_overwritten_in_place_refuses_the_next_message(
        tmp_path: Path, copy: object, said: str) -> None:
    db = tmp_path / "m.db"
    assert callable(copy)
    source = await copy(tmp_path, db)
    async with SQLiteStore(db) as store:
        first = await store.create_run(_run("a", "r1"))
        await store.create_run(_run("b", "r2"))
        assert store.gone() is None
        _copy_over(source, db)
        with pytest.raises(StoreGone, match="was overwritten") as refused:
            await store.create_run(_run("c", "r3"))
        assert said in str(refused.value) and "restart maiden" in str(refused.value)
        # From then on, as for a deleted file: checkpoints refused without a look.
        with pytest.raises(StoreGone):
            await store.commit(Checkpoint("a", None, run=first.model_copy(
                update={"version": first.version + 1})))
        assert said in (store.gone() or "")


def _file_copy(db: Path, copy: Path) -> None:
    shutil.copyfile(db, copy)  # after a checkpoint that copied the whole log: all of it


def _backup(db: Path, copy: Path) -> None:
    with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)  # SQLite's online backup: the log's rows too


@pytest.mark.parametrize("take", [_file_copy, _backup])
async def test_a_copy_taken_while_open_put_back_after_a_checkpoint_refuses_the_next_message(
        tmp_path: Path, take: object) -> None:
    db, copy = tmp_path / "m.db", tmp_path / "copy.db"
    assert callable(take)
    async with SQLiteStore(db) as store:
        await store.create_run(_run("a", "r1"))
        await store._write_side().checkpoint()
        take(db, copy)  # holds this process's mark
        for i in range(300):  # a periodic checkpoint among them
            await store.create_run(_run(f"t{i}", f"r{i:04}"))
        await store._write_side().checkpoint()
        await store.create_run(_run("b", "r2"))  # the log starts again
        assert store.gone() is None
        _copy_over(copy, db)  # what the checkpoints copied into the file is lost
        with pytest.raises(StoreGone, match=r"was overwritten \(it holds an older copy of "
                                            r"this store, taken while this process had it"):
            await store.create_run(_run("c", "r3"))


async def test_a_checkpoint_held_back_by_a_reader_is_not_an_overwrite(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store:
        await store.create_run(_run("a", "r1"))
        with closing(sqlite3.connect(db, isolation_level=None)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM runs").fetchone()  # holds its snapshot
            for i in range(300):  # checkpoints that copy only up to the reader's snapshot
                await store.create_run(_run(f"t{i}", f"r{i:04}"))
            await store._write_side().checkpoint()
            mark = store._mark
            assert mark.copied < mark.written  # the file may hold either: both are taken
            await store.create_run(_run("b", "r2"))
            assert store.gone() is None
            reader.execute("COMMIT")
        await store._write_side().checkpoint()
        assert mark.copied == mark.written
        await store.create_run(_run("c", "r3"))
        assert store.gone() is None


async def test_checkpoints_that_write_the_database_are_not_an_overwrite(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store, SQLiteStore(db) as other:
        size = db.stat().st_size
        # This store's own checkpoints (every few hundred commits) and another process's
        # open (its migration, its mark, its checkpoint) write the file: both verified.
        for i in range(600):
            await store.create_run(_run(f"t{i}", f"r{i:04}"))
        await other.create_run(_run("u", "u1"))
        async with SQLiteStore(db) as third:
            await third.create_run(_run("v", "v1"))
        assert db.stat().st_size > size
        assert store.gone() is None and other.gone() is None
        await store.create_run(_run("w", "w1"))
    async with SQLiteStore(db) as store:
        assert len(await store.list_runs()) == 603


async def test_a_files_store_overwritten_in_place_refuses_the_next_message(
        tmp_path: Path) -> None:
    root, other = tmp_path / "files", tmp_path / "other"
    async with FilesStore(other) as store:
        await store.create_run(_run("a", "r0"))
    async with FilesStore(root) as store:
        await store.create_run(_run("a", "r1"))
        assert store.gone() is None
        shutil.copytree(other, root, dirs_exist_ok=True)  # cp -r other/. files/
        with pytest.raises(StoreGone, match=r"store folder .* was overwritten \(store.json "
                                            r"names another store, identity "):
            await store.create_run(_run("b", "r2"))
        assert "restart maiden" in (store.gone() or "")


async def test_a_files_store_with_a_backup_put_back_refuses_the_next_message(
        tmp_path: Path) -> None:
    root = tmp_path / "files"
    async with FilesStore(root) as store:
        await store.create_run(_run("a", "r0"))
    backup = Path(shutil.copytree(root, tmp_path / "backup"))
    async with FilesStore(root) as store:
        await store.create_run(_run("a", "r1"))
        # Written by another process's open (it finds the identity there): not a copy.
        async with FilesStore(root) as again:
            await again.create_run(_run("b", "r2"))
        assert store.gone() is None
        _copy_over(backup / "store.json", root / "store.json")
        with pytest.raises(StoreGone, match=r"store.json was written again: a copy of this "
                                            r"store was put over it"):
            await store.create_run(_run("c", "r3"))


async def test_a_files_store_from_before_identities_gets_one(tmp_path: Path) -> None:
    root = tmp_path / "files"
    async with FilesStore(root) as store:
        await store.create_run(_run("a", "r0"))
    (root / "store.json").write_text('{"format": 1, "kind": "maiden-files"}')
    async with FilesStore(root) as store:
        made = json.loads((root / "store.json").read_text())
        assert len(made["id"]) == 32
        assert [r.id for r in await store.list_runs()] == ["r0"]
        await store.create_run(_run("b", "r1"))
        assert store.gone() is None
    async with FilesStore(root):
        assert json.loads((root / "store.json").read_text()) == made
