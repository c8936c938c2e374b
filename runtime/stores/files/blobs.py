"""The files store's blobs: ``blobs/{digest}`` holds the bytes, ``blobs/{digest}.json`` its
record. The record is written first, the bytes last (each atomically): a blob exists once
its bytes do, and a crash between the two leaves a record that the next put rewrites."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from pathlib import Path

from ...errors import NotFound
from ...model.attachments.refs import BlobInfo
from ..base import BlobStore, check_digest
from .core import FilesCore, parse_file
from .fs import read_or_none

__all__ = ["FilesBlobs"]


class FilesBlobs(FilesCore, BlobStore):
    """The files store's ``BlobStore``."""

    async def put_blob(self, data: bytes, media_type: str, at: float) -> BlobInfo:
        info = BlobInfo(digest=hashlib.sha256(data).hexdigest(), size=len(data),
                        media_type=media_type, created_at=at)
        return await self._disk.io(self._put, info, data)

    async def get_blob(self, digest: str) -> bytes:
        data = await self._disk.io(read_or_none, self._blob_path(check_digest(digest)))
        if data is None:
            raise NotFound(f"no file {digest} in the store")
        return data

    async def blob_info(self, digest: str) -> BlobInfo | None:
        return await self._disk.io(self._info, check_digest(digest))

    async def blobs(self) -> list[BlobInfo]:
        found = await self._disk.io(self._all)
        return sorted(found, key=lambda b: (b.created_at, b.digest))

    async def delete_blobs(self, digests: Sequence[str]) -> int:
        names = [check_digest(d) for d in digests]
        return await self._disk.io(self._delete, names) if names else 0

    # -- synchronous work, run in a worker thread

    def _blob_path(self, digest: str) -> Path:
        return self._folder("blobs") / digest

    def _put(self, info: BlobInfo, data: bytes) -> BlobInfo:
        stored = self._info(info.digest)
        if stored is not None:
            return stored
        path = self._blob_path(info.digest)
        self._disk.write(path.with_suffix(".json"), info.model_dump_json().encode())
        self._disk.write(path, data)
        return info

    def _info(self, digest: str) -> BlobInfo | None:
        path = self._blob_path(digest)
        if not path.exists():
            return None
        meta = path.with_suffix(".json")
        if meta.exists():
            return parse_file(meta, BlobInfo)
        stat = path.stat()  # written by hand, or its record lost: what the file says
        return BlobInfo(digest=digest, size=stat.st_size, media_type="application/octet-stream",
                        created_at=stat.st_mtime)

    def _all(self) -> list[BlobInfo]:
        found = (self._info(p.name) for p in self._folder("blobs").iterdir()
                 if len(p.name) == 64 and not p.suffix)
        return [info for info in found if info is not None]

    def _delete(self, digests: list[str]) -> int:
        gone = 0
        for digest in digests:
            path = self._blob_path(digest)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                gone += 1
            with contextlib.suppress(FileNotFoundError):
                path.with_suffix(".json").unlink()
        return gone
