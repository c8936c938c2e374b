"""The SQLite store's blobs: a row per blob, its bytes in the row (SQLite keeps a blob of
a few megabytes in overflow pages of its own, read only when asked for)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence

from ...errors import NotFound
from ...model.attachments.refs import BlobInfo
from ..base import BlobStore, check_digest
from .core import SQLiteCore

__all__ = ["SQLiteBlobs"]


class SQLiteBlobs(SQLiteCore, BlobStore):
    """The SQLite store's ``BlobStore``."""

    async def put_blob(self, data: bytes, media_type: str, at: float) -> BlobInfo:
        info = BlobInfo(digest=hashlib.sha256(data).hexdigest(), size=len(data),
                        media_type=media_type, created_at=at)

        def put(db: sqlite3.Connection) -> BlobInfo:
            row = db.execute("SELECT size, media_type, created_at FROM blobs WHERE digest = ?",
                             (info.digest,)).fetchone()
            if row is not None:
                return BlobInfo(digest=info.digest, size=row[0], media_type=row[1],
                                created_at=row[2])
            db.execute("INSERT INTO blobs VALUES (?, ?, ?, ?, ?)",
                       (info.digest, info.size, info.media_type, info.created_at, data))
            return info

        return await self._write(put)

    async def get_blob(self, digest: str) -> bytes:
        check_digest(digest)
        rows = await self._fetchall("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if not rows:
            raise NotFound(f"no file {digest} in the store")
        return bytes(rows[0][0])

    async def blob_info(self, digest: str) -> BlobInfo | None:
        check_digest(digest)
        rows = await self._fetchall(
            "SELECT digest, size, media_type, created_at FROM blobs WHERE digest = ?",
            (digest,))
        return _info(rows[0]) if rows else None

    async def blobs(self) -> list[BlobInfo]:
        rows = await self._fetchall("SELECT digest, size, media_type, created_at FROM blobs "
                                    "ORDER BY created_at, digest")
        return [_info(row) for row in rows]

    async def delete_blobs(self, digests: Sequence[str]) -> int:
        names = [check_digest(d) for d in digests]

        def delete(db: sqlite3.Connection) -> int:
            return sum(db.execute("DELETE FROM blobs WHERE digest = ?", (d,)).rowcount
                       for d in names)

        return await self._write(delete) if names else 0


def _info(row: Sequence[object]) -> BlobInfo:
    digest, size, media_type, created_at = row
    return BlobInfo(digest=str(digest), size=int(str(size)), media_type=str(media_type),
                    created_at=float(str(created_at)))
