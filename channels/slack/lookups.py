"""What maiden asks Slack about a channel or a person as a message comes in, kept a while.

An ``app_mention`` event does not say whether its channel is private (it carries no
``channel_type``; docs.slack.dev/reference/events/app_mention), so ``SlackPrivacy`` asks
``conversations.info`` (scopes ``channels:read``, ``groups:read``, ``mpim:read``): its
``channel`` says ``is_private``, ``is_im``, ``is_mpim``. A public channel can be made
private, so the answer is kept minutes, not days. ``zones.SlackZones`` asks ``users.info``
(``users:read``) for the name a person shows (``profile.display_name``, else
``real_name``), kept a day with their time zone (``zones.SlackZones``: one call a
person), for the source of what they teach the agent.

Both are asked before Slack gets its acknowledgement, so an ask is waited for at most
``wait_s`` (it goes on, and its answer is kept for the next message). No answer (a Slack
error such as ``missing_scope``, the network, the wait) is None, is not kept, and is logged
once per channel or person until an ask for them succeeds: the channel is then taken as
private (what is learned there is recalled only there), the person goes by their id.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from ..retry import reason_of
from .lifecycle import log

__all__ = ["CHANNEL_KEEP_S", "WAIT_S", "SlackLookup", "SlackPrivacy", "name_of",
           "private_of"]

CHANNEL_KEEP_S = 300.0
"""How long a channel's privacy is kept: a channel made private is private within this."""
WAIT_S = 2.0
"""The longest a message waits for an answer (Slack wants its ack within 3 seconds)."""
MOST = 10_000
"""How many answers are kept (the oldest asked go first)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Kept(Generic[T]):
    value: T
    at: float


class SlackLookup(Generic[T]):
    """``await lookup(key)``: what ``ask(key)`` answered within ``keep_s``, or a new answer,
    or None. Asks for a key under way are shared; at most ``most`` answers are kept."""

    def __init__(self, method: str, ask: Callable[[str], Awaitable[T]], *, keep_s: float,
                 scopes: str, fallback: str, wait_s: float = WAIT_S, most: int = MOST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.method = method
        self._ask = ask
        self.keep_s = keep_s
        self._scopes = scopes
        self._fallback = fallback
        self.wait_s = wait_s
        self._most = most
        self.clock = clock
        self._kept: OrderedDict[str, _Kept[T]] = OrderedDict()
        self._asking: dict[str, asyncio.Task[T | None]] = {}
        self._told: set[str] = set()

    async def __call__(self, key: str) -> T | None:
        kept = self._kept.get(key)
        if kept is not None and self.clock() - kept.at < self.keep_s:
            return kept.value
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.create_task(self._answer(key), name=f"maiden-slack-{self.method}")
            self._asking[key] = asking
            asking.add_done_callback(lambda _: self._asking.pop(key, None))
        try:  # shielded: the ask goes on past the wait, and its answer is kept
            return await asyncio.wait_for(asyncio.shield(asking), self.wait_s)
        except TimeoutError:
            self._failed(key, f"no answer within {self.wait_s:g}s")
            return None

    async def close(self) -> None:
        """Cancel the asks under way (the channel is closing)."""
        for task in list(self._asking.values()):
            task.cancel()
        await asyncio.gather(*self._asking.values(), return_exceptions=True)

    async def _answer(self, key: str) -> T | None:
        try:
            value = await self._ask(key)
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else exc
            why = f"{self.method} answered {error}"
            if error == "missing_scope":
                why += f": the app needs {self._scopes} (add it and reinstall the app)"
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            why = f"Slack could not be reached: {reason_of(exc)}"
        except asyncio.CancelledError:  # by ``close`` only (askers are shielded from it)
            return None
        else:
            self._kept[key] = _Kept(value, self.clock())
            self._kept.move_to_end(key)
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)
            self._told.discard(key)
            return value
        self._failed(key, why)
        return None

    def _failed(self, key: str, why: str) -> None:
        if key not in self._told:
            if len(self._told) >= self._most:  # bounded: some may be told again
                self._told.clear()
            self._told.add(key)
            log.warning("slack: %s for %s failed (%s); %s", self.method, key, why,
                        self._fallback)


class SlackPrivacy(SlackLookup[bool]):
    """``await privacy(channel)``: whether a Slack channel is private (a private channel, a
    group DM, a DM); True when Slack gives no answer (failing closed)."""

    def __init__(self, client: AsyncWebClient, **options: Any) -> None:
        async def ask(channel: str) -> bool:
            answer = await client.conversations_info(channel=channel)
            return private_of(answer.get("channel") or {})
        options.setdefault("keep_s", CHANNEL_KEEP_S)
        super().__init__("conversations.info", ask,
                         scopes="channels:read, groups:read and mpim:read",
                         fallback="its channel is taken as private", **options)

    async def private(self, channel: str) -> bool:
        return await self(channel) is not False


def private_of(channel: dict[str, Any]) -> bool:
    """Whether a ``conversations.info`` channel is private: public only when Slack says it
    is a channel that is not private (``is_private`` false, not a DM or a group DM)."""
    return not (channel.get("is_private") is False and not channel.get("is_im")
                and not channel.get("is_mpim"))


def name_of(person: dict[str, Any]) -> str | None:
    """The name Slack shows for a ``users.info`` user: their display name, else their
    real name (each may be empty: a display name is optional)."""
    profile = person.get("profile") or {}
    for name in (profile.get("display_name"), profile.get("real_name"),
                 person.get("real_name")):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None
