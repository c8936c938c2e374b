"""The PostgreSQL store's blobs: a row per blob, its bytes a ``bytea`` (TOASTed out of
line, read only when asked for)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ...errors import NotFound
from ...model.attachments.refs import BlobInfo
from ..base import BlobStore, check_digest
from .core import PostgresCore

__all__ = ["PostgresBlobs"]

_COLUMNS = "digest, size, media_type, created_at"


class PostgresBlobs(PostgresCore, BlobStore):
    """The PostgreSQL store's ``BlobStore``."""

    async def put_blob(self, data: bytes, media_type: str, at: float) -> BlobInfo:
        info = BlobInfo(digest=hashlib.sha256(data).hexdigest(), size=len(data),
                        media_type=media_type, created_at=at)
        # Another replica's put of the same bytes may land first: either way one row.
        await self._value("INSERT INTO blobs VALUES ($1, $2, $3, $4, $5) "
                          "ON CONFLICT (digest) DO NOTHING", info.digest, info.size,
                          info.media_type, info.created_at, data)
        stored = await self.blob_info(info.digest)
        return stored or info

    async def get_blob(self, digest: str) -> bytes:
        data = await self._value("SELECT data FROM blobs WHERE digest = $1",
                                 check_digest(digest))
        if data is None:
            raise NotFound(f"no file {digest} in the store")
        return bytes(data)

    async def blob_info(self, digest: str) -> BlobInfo | None:
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM blobs WHERE digest = $1",
                                 check_digest(digest))
        return _info(rows[0]) if rows else None

    async def blobs(self) -> list[BlobInfo]:
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM blobs ORDER BY created_at, digest")
        return [_info(row) for row in rows]

    async def delete_blobs(self, digests: Sequence[str]) -> int:
        names = [check_digest(d) for d in digests]
        if not names:
            return 0
        gone = await self._value("WITH gone AS (DELETE FROM blobs WHERE digest = ANY($1) "
                                 "RETURNING 1) SELECT count(*) FROM gone", names)
        return int(gone or 0)


def _info(row: Any) -> BlobInfo:
    return BlobInfo(digest=row["digest"], size=row["size"], media_type=row["media_type"],
                    created_at=row["created_at"])
