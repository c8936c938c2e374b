"""Which failures of a Slack Web API call trying again may get past: Slack's own trouble
(a 5xx, 429, or an error it names as its own) and the network's, not a refusal; and how a
listener's failure is told."""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from runtime import MaidenError

__all__ = ["NETWORK", "TRY_LATER", "listener_failed", "passing"]

log = logging.getLogger("maiden.slack")

TRY_LATER = frozenset({"ratelimited", "fatal_error", "internal_error", "service_unavailable",
                       "request_timeout"})
"""Errors Slack answers with when it is the problem, not the token."""
NETWORK = (SlackClientError, aiohttp.ClientError, OSError, TimeoutError)
"""What a call raises when Slack could not be reached or answered nothing readable (a
dropped connection is an ``aiohttp.ClientError`` that is no ``OSError``)."""


def passing(error: BaseException) -> bool:
    """Whether a failed call may work if tried again later."""
    if isinstance(error, SlackApiError):
        status = error.response.status_code if error.response is not None else 0
        said = error.response.get("error") if error.response is not None else None
        return status >= 500 or status == 429 or said in TRY_LATER
    return isinstance(error, NETWORK)


async def listener_failed(error: Exception) -> None:
    """Bolt's error handler (``App.error``): what failed is not acknowledged either way
    (500), so Slack sends an event again and shows the person a click or command failed.
    A failure maiden names (the store out of reach or full, the runtime shutting down) is
    one line; anything else keeps its traceback."""
    if isinstance(error, MaidenError):
        log.warning("slack: not taken, so not acknowledged (Slack sends an event again, and "
                    "shows a click or command failed): %s", error)
    else:
        log.error("slack: a listener failed (error: %s)", error, exc_info=error)
