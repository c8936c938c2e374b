"""A person's time zone and name from their Slack profile (``users.info``, scope
``users:read``): the zone so that "remind me tomorrow at 9" means 9 where they are, the name
(``profile.display_name``, else ``real_name``) for the source of what they teach the agent.
One call a person gives both.

A zone seldom changes and people set reminders often, so each person's is kept a day
(``keep_s``), and asks for someone whose call is under way wait for that call. A failure
(Slack's error: ``missing_scope``, ``user_not_found``, ``ratelimited`` after the client's
own retries; the network; a ``tz`` this host's tz database cannot load) is None and is not
kept, so the next ask tries again; it is logged once per person, until an ask for them
succeeds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from ..retry import reason_of
from .lifecycle import log
from .lookups import WAIT_S, name_of

__all__ = ["DAY_S", "SlackZones"]

DAY_S = 86_400.0

_FALLBACK = "times they give are read in the agent's time zone"


@dataclass(frozen=True)
class _Kept:
    zone: str | None
    name: str | None
    at: float


class SlackZones:
    """``await zones(user)``: the IANA time zone of a Slack user id, or None (a bot, a
    profile without one, or no answer to be had); ``await zones.name(user)``: the name they
    show, or None. ``clock``: seconds, for ``keep_s``."""

    def __init__(self, client: AsyncWebClient, *, clock: Callable[[], float] = time.monotonic,
                 keep_s: float = DAY_S) -> None:
        self.client = client
        self.clock = clock
        self.keep_s = keep_s
        self._kept: dict[str, _Kept] = {}
        self._asking: dict[str, asyncio.Task[_Kept | None]] = {}
        self._told: set[str] = set()
        """People whose failure was logged (cleared when an ask for them succeeds)."""

    async def __call__(self, user: str) -> str | None:
        # Shielded: one asker cancelled (its tool call timed out) leaves the call to the rest.
        found = await asyncio.shield(self._asked(user))
        return None if found is None else found.zone

    async def name(self, user: str, *, wait_s: float = WAIT_S) -> str | None:
        """The name ``user`` shows, waiting at most ``wait_s`` (a message waits for it
        before Slack gets its acknowledgement; the ask goes on and its answer is kept)."""
        try:
            found = await asyncio.wait_for(asyncio.shield(self._asked(user)), wait_s)
        except TimeoutError:
            return None
        return None if found is None else found.name

    def _asked(self, user: str) -> asyncio.Future[_Kept | None]:
        kept = self._kept.get(user)
        if kept is not None and self.clock() - kept.at < self.keep_s:
            done: asyncio.Future[_Kept | None] = asyncio.get_running_loop().create_future()
            done.set_result(kept)
            return done
        asking = self._asking.get(user)
        if asking is None:
            asking = asyncio.create_task(self._ask(user), name="maiden-slack-person")
            self._asking[user] = asking
            asking.add_done_callback(lambda _: self._asking.pop(user, None))
        return asking

    async def close(self) -> None:
        """Cancel the calls under way (the channel is closing): who waits for one gets
        None."""
        for task in list(self._asking.values()):
            task.cancel()
        await asyncio.gather(*self._asking.values(), return_exceptions=True)

    async def _ask(self, user: str) -> _Kept | None:
        found = None
        try:
            answer = await self.client.users_info(user=user)
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else exc
            why = f"users.info answered {error}"
            if error == "missing_scope":
                why += ": the app needs the users:read scope (add it and reinstall the app)"
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            why = f"Slack could not be reached: {reason_of(exc)}"
        except asyncio.CancelledError:  # by ``close`` only (askers are shielded from it)
            return None
        else:
            person = answer.get("user") or {}
            zone = None if person.get("is_bot") else person.get("tz") or None
            found = _Kept(zone, name_of(person), self.clock())
            if zone is None or _loads(zone):
                self._kept[user] = found
                self._told.discard(user)
                return found
            why = f"Slack gives it as {zone!r}, which this host's tz database does not know"
            found = _Kept(None, found.name, found.at)  # its name, this once: nothing kept
        if user not in self._told:
            self._told.add(user)
            log.warning("slack: the time zone of %s could not be read (%s); %s", user, why,
                        _FALLBACK)
        return found


def _loads(zone: str) -> bool:
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
