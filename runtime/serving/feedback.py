"""The ``feedback`` service: people's 👍 / 👎 on a run's reply, one vote per person per run.

A channel records a click with ``vote``; the person is whoever the platform says clicked,
the run is the one whose reply carries the buttons. A vote on a run that did not answer
in that channel is refused: a button cannot be made to vote on someone else's run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..errors import NotFound, RunError
from ..model.requests import Vote
from ..model.runs import RunState
from ..stores.base import FeedbackStore, RunStore

__all__ = ["Feedback", "VoteValue"]

VoteValue = Literal["up", "down"]


class Feedback:
    """Votes on replies, recorded once per person per run (a change of mind replaces it)."""

    def __init__(self, store: FeedbackStore, runs: RunStore,
                 clock: Callable[[], float]) -> None:
        self._store = store
        self._runs = runs
        self._clock = clock

    async def vote(self, run_id: str, value: VoteValue, *, user: str, channel: str,
                   place: str | None = None, message: str | None = None
                   ) -> tuple[Vote, bool]:
        """Record ``user``'s vote on the run's reply: the vote as it stands, and whether it
        changed (False: the same click again, kept with its first time). ``RunError``
        (``vote_refused``) if the run is unknown, did not answer, or answered elsewhere."""
        if value not in ("up", "down"):
            raise RunError("vote_refused", f"a vote is up or down, not {value!r}")
        if not user:
            raise RunError("vote_refused", "a vote needs the person who gave it")
        try:
            run = await self._runs.get_run(run_id)
        except NotFound:
            raise RunError("vote_refused", f"no run {run_id}") from None
        if run.origin.channel != channel:
            raise RunError("vote_refused", f"run {run_id} did not answer in {channel}")
        if run.state is not RunState.COMPLETED:
            raise RunError("vote_refused", f"run {run_id} has no answer to vote on "
                                           f"(it is {run.state.value})")
        vote = Vote(run_id=run_id, user=user, value=value, at=self._clock(),
                    thread_id=run.thread_id, channel=channel, place=place, message=message)
        if await self._store.put_vote(vote):
            return vote, True
        (stored,) = [v for v in await self._store.votes(run_id=run_id) if v.user == user]
        return stored, False

    async def votes(self, *, run_id: str | None = None, since: float | None = None,
                    limit: int | None = None) -> list[Vote]:
        """Votes by time, oldest first: a run's, or those after ``since`` (a page of
        ``limit``; the next page starts after the last one's ``at``)."""
        return await self._store.votes(run_id=run_id, since=since, limit=limit)
