"""The PostgreSQL store's votes on replies: a row per person per run."""

from __future__ import annotations

from typing import Any

from ...model.requests import Vote
from ..base import FeedbackStore
from .core import PostgresCore

__all__ = ["PostgresFeedback"]


class PostgresFeedback(PostgresCore, FeedbackStore):
    """The PostgreSQL store's ``FeedbackStore``."""

    async def put_vote(self, vote: Vote) -> bool:
        # One statement: a vote with the same value is left as it is (its first time).
        written = await self._value(
            "INSERT INTO feedback VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, \"user\") "
            "DO UPDATE SET value = excluded.value, at = excluded.at, data = excluded.data "
            "WHERE feedback.value <> excluded.value RETURNING true",
            vote.run_id, vote.user, vote.value, vote.at, vote.model_dump_json())
        return bool(written)

    async def votes(self, *, run_id: str | None = None, since: float | None = None,
                    limit: int | None = None) -> list[Vote]:
        where: list[str] = []
        args: list[Any] = []
        if run_id is not None:
            args.append(run_id)
            where.append(f"run_id = ${len(args)}")
        if since is not None:
            args.append(since)
            where.append(f"at > ${len(args)}")
        sql = "SELECT data FROM feedback" + (f" WHERE {' AND '.join(where)}" if where else "") \
            + " ORDER BY at, run_id, \"user\""
        if limit is not None:
            args.append(limit)
            sql += f" LIMIT ${len(args)}"
        return await self._parsed(Vote.model_validate_json, sql, *args)
