"""The files store's votes on replies: ``feedback/{run name}.json``, one file per run with
each person's vote, rewritten whole under its lock (a run gets a few votes at most)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ...model.requests import Vote
from ..base import FeedbackStore
from .core import FilesCore, parse_file
from .names import run_file_name

__all__ = ["FilesFeedback"]


class FilesFeedback(FilesCore, FeedbackStore):
    """The files store's ``FeedbackStore``."""

    async def put_vote(self, vote: Vote) -> bool:
        return await self._disk.io(self._put_vote, vote)

    async def votes(self, *, run_id: str | None = None, since: float | None = None,
                    limit: int | None = None) -> list[Vote]:
        found = await self._disk.io(self._votes, run_id)
        found = sorted((v for v in found if since is None or v.at > since),
                       key=lambda v: (v.at, v.run_id, v.user))
        return found if limit is None else found[:limit]

    # -- synchronous work, run in a worker thread

    def _path(self, run_id: str) -> Path:
        return self._folder("feedback") / f"{run_file_name(run_id)}.json"

    def _put_vote(self, vote: Vote) -> bool:
        path = self._path(vote.run_id)
        with self._disk.lock(path.with_suffix(".lock")):
            stored = parse_file(path, _Votes) if path.exists() else _Votes(run_id=vote.run_id)
            before = stored.votes.get(vote.user)
            if before is not None and before.value == vote.value:
                return False
            self._disk.write(path, _Votes(run_id=vote.run_id,
                                          votes=stored.votes | {vote.user: vote})
                             .model_dump_json().encode())
        return True

    def _votes(self, run_id: str | None) -> list[Vote]:
        if run_id is not None:
            path = self._path(run_id)
            return list(parse_file(path, _Votes).votes.values()) if path.exists() else []
        return [vote for path in sorted(self._folder("feedback").glob("*.json"))
                for vote in parse_file(path, _Votes).votes.values()]


class _Votes(BaseModel):
    run_id: str
    votes: dict[str, Vote] = {}
    """By person."""
