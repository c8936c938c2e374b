"""The files store's folders (runtime/stores/files/folders.py): a thread's snapshot read
back only if whole and under its own thread's name, and pointers that say what they point
from."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import CorruptStore
from runtime.stores.base import Checkpoint
from runtime.stores.files import FilesStore, thread_file_name
from runtime.stores.files.folders import Pointers
from runtime.stores.files.fs import Disk
from runtime.stores.files.names import key_file_name
from tests.runtime.stores.contract import started


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FilesStore]:
    async with FilesStore(tmp_path / "files") as opened:
        yield opened


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"format": 2}', b"\xff\xfe",
                                     b'{"format": 1, "thread_id": "t"}'])
async def test_an_unreadable_snapshot_is_corrupt(
    files: FilesStore, tmp_path: Path, content: bytes
) -> None:
    await started(files)
    snapshot = tmp_path / "files" / "threads" / f"{thread_file_name('t')}.json"
    snapshot.write_bytes(content)
    with pytest.raises(CorruptStore, match=re.escape(snapshot.name)):
        await files.load_entries("t")
    with pytest.raises(CorruptStore, match=re.escape(snapshot.name)):
        await files.list_threads()
    with pytest.raises(CorruptStore):
        await files.commit(Checkpoint("t", 1, []))


async def test_a_snapshot_of_another_thread_is_corrupt(files: FilesStore, tmp_path: Path) -> None:
    await started(files, thread_id="a")
    await started(files, thread_id="b")
    threads = tmp_path / "files" / "threads"
    # What a hash collision (or a hand-copied file) would look like.
    (threads / f"{thread_file_name('b')}.json").write_bytes(
        (threads / f"{thread_file_name('a')}.json").read_bytes())
    with pytest.raises(CorruptStore, match="holds thread 'a'"):
        await files.load_entries("b")
    with pytest.raises(CorruptStore):
        await files.list_threads()


@pytest.fixture
def pointers(tmp_path: Path) -> Pointers:
    (tmp_path / "idempotency").mkdir()
    return Pointers(Disk(tmp_path, fsync=False, lock_timeout_s=1.0), "idempotency", "key",
                    key_file_name)


def test_a_pointer_is_read_back_as_written_and_a_missing_one_is_none(
        pointers: Pointers) -> None:
    assert pointers.get("slack:1") is None
    pointers.put(key="slack:1", run_id="r1", thread_id="t")
    pointers.put(key="slack:2", run_id="r2", thread_id="t")
    assert list((pointers.get("slack:1") or {}).items()) == [
        ("key", "slack:1"), ("run_id", "r1"), ("thread_id", "t")]
    pointers.put(key="slack:1", run_id="r3", thread_id="t")  # overwritten
    assert pointers.get("slack:1") == {"key": "slack:1", "run_id": "r3", "thread_id": "t"}


@pytest.mark.parametrize(("content", "why"), [
    (b'{"key": "slack:2", "run_id": "r"}', "does not point from key 'slack:1'"),
    (b'{"key": "slack:1", "run_id": 7}', "a value is not a string"),
    (b'["slack:1"]', "does not point from key"),
    (b"{", "unreadable pointer"),
])
def test_a_pointer_that_does_not_say_what_it_points_from_is_corrupt(
        pointers: Pointers, content: bytes, why: str) -> None:
    """What a hash collision, or a file copied or cut by hand, would look like."""
    path = pointers.folder / key_file_name("slack:1")
    path.write_bytes(content)
    with pytest.raises(CorruptStore, match=re.escape(why)) as caught:
        pointers.get("slack:1")
    assert str(path) in str(caught.value)
