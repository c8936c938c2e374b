"""The SQLite store's votes on replies: a row per person per run."""

from __future__ import annotations

import sqlite3
from typing import Any

from ...model.requests import Vote
from ..base import FeedbackStore
from .core import SQLiteCore

__all__ = ["SQLiteFeedback"]


class SQLiteFeedback(SQLiteCore, FeedbackStore):
    """The SQLite store's ``FeedbackStore``."""

    async def put_vote(self, vote: Vote) -> bool:
        def put(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT value FROM feedback WHERE run_id = ? AND user = ?",
                             (vote.run_id, vote.user)).fetchone()
            if row is not None and row[0] == vote.value:
                return False
            db.execute("INSERT OR REPLACE INTO feedback VALUES (?, ?, ?, ?, ?)",
                       (vote.run_id, vote.user, vote.value, vote.at, vote.model_dump_json()))
            return True

        return await self._write(put)

    async def votes(self, *, run_id: str | None = None, since: float | None = None,
                    limit: int | None = None) -> list[Vote]:
        where: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if since is not None:
            where.append("at > ?")
            params.append(since)
        sql = "SELECT data FROM feedback" + (f" WHERE {' AND '.join(where)}" if where else "") \
            + " ORDER BY at, run_id, user"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [Vote.model_validate_json(row[0]) for row in await self._fetchall(sql, params)]
