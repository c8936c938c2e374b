"""The files store's core (runtime/stores/files/core.py): its open, which makes the store's
folders and marker, refuses another format and cleans up what a crashed writer left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import StoreError
from runtime.stores.files import FilesStore


async def test_stale_temp_files_are_cleaned_on_open(tmp_path: Path) -> None:
    async with FilesStore(tmp_path / "files"):
        pass
    old = tmp_path / "files" / "threads" / ".t-x.json.00.tmp"
    fresh = tmp_path / "files" / "threads" / ".t-y.json.00.tmp"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(old, (0, 0))
    async with FilesStore(tmp_path / "files"):
        pass
    assert not old.exists()
    assert fresh.exists()  # may belong to another process's write in progress


async def test_another_format_is_refused(tmp_path: Path) -> None:
    async with FilesStore(tmp_path / "files"):
        pass
    (tmp_path / "files" / "store.json").write_text('{"format": 99}')
    with pytest.raises(StoreError, match="format 99"):
        await FilesStore(tmp_path / "files").open()
