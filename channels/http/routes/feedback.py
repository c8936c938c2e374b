"""/v1/feedback: people's votes (👍 / 👎) on the bot's answers in Slack and Discord."""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime.
from typing import Annotated

from fastapi import APIRouter, Query

from runtime import Vote

from ..deps import Api, Caller, secured
from ..errors import problem_responses
from ..models import FeedbackPage
from .common import DENIED

__all__ = ["router"]

router = APIRouter(tags=["feedback"])


@router.get("/v1/feedback", dependencies=secured, responses=problem_responses(*DENIED, 422))
async def list_feedback(
    api: Api,
    who: Caller,
    since: Annotated[float | None, Query(description="only votes given or changed after "
                                                     "this time (Unix seconds)")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> FeedbackPage:
    """Votes on answers, oldest first: one per person per run, a changed vote at the time
    it changed. Page with ``since``: the next page starts after the last vote's ``at``."""
    # Votes of one instant stay on one page (the next starts after that instant): the
    # page ends before the instant it would cut, or, if one instant fills it, holds all of it.
    mine = None
    if not who.may("operate"):  # only the votes on threads the caller may see
        mine = [v for v in await api.runtime.kept.feedback.votes(since=since)
                if await api.owners.may_see(who, v.thread_id)]
    ask = limit
    while True:
        votes = mine[:ask + 1] if mine is not None else \
            await api.runtime.kept.feedback.votes(since=since, limit=ask + 1)
        found = _page(votes, limit, ask)
        if found is not None:
            return found
        ask *= 2


def _page(votes: list[Vote], limit: int, ask: int) -> FeedbackPage | None:
    """A page of ``votes`` (``ask`` + 1 of them were asked for), or None if one instant
    fills more than ``ask``: ask for more."""
    if len(votes) <= ask:
        return FeedbackPage(votes=votes, next_since=None)
    page = [v for v in votes[:limit] if v.at != votes[ask].at]
    if page or votes[0].at != votes[ask].at:
        page = page or [v for v in votes[:ask] if v.at != votes[ask].at]
        return FeedbackPage(votes=page, next_since=page[-1].at)
    return None
