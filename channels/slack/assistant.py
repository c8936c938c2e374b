"""Slack's surface for AI apps, in the assistant view: suggested prompts when a person
opens a new assistant thread (``[channels.slack] suggested_prompts``), and the thread's
title from its first message. Both are cosmetic: a failure is logged, never a reply lost.
The status while a run works is the channel's (``assistant.threads.setStatus``)."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from .failures import NETWORK
from .mapping import Inbound

__all__ = ["AssistantThreads", "prompts_of"]

log = logging.getLogger("maiden.slack")

_TITLE_CHARS = 60
_PROMPT_TITLE_CHARS = 40
_OPENED_KEPT = 1_000


def prompts_of(suggested: list[str]) -> list[dict[str, str]]:
    """The configured prompts as Slack's ``{"title", "message"}`` pairs (at most four)."""
    return [{"title": _short(text, _PROMPT_TITLE_CHARS), "message": text}
            for text in suggested[:4]]


def _short(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


class AssistantThreads:
    """Assistant threads opened while this process listens, until their first message."""

    def __init__(self, client: AsyncWebClient, suggested: list[str]) -> None:
        self.client = client
        self.prompts = prompts_of(suggested)
        self._opened: dict[tuple[str, str], None] = {}

    async def started(self, event: dict[str, Any]) -> None:
        """``assistant_thread_started``: offer the suggested prompts; the thread's first
        message will give it its title."""
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not channel or not thread_ts:
            return
        self._opened[(str(channel), str(thread_ts))] = None
        while len(self._opened) > _OPENED_KEPT:
            del self._opened[next(iter(self._opened))]
        if self.prompts:
            await self._call("setSuggestedPrompts",
                             self.client.assistant_threads_setSuggestedPrompts,
                             channel_id=channel, thread_ts=thread_ts, prompts=self.prompts)

    async def first_message(self, seen: Inbound) -> None:
        """A message a person may send here: the first of an opened assistant thread
        names it."""
        where = (seen.channel, seen.reply_in or "")
        if where not in self._opened or not seen.text:
            return
        del self._opened[where]
        await self._call("setTitle", self.client.assistant_threads_setTitle,
                         channel_id=seen.channel, thread_ts=seen.reply_in,
                         title=_short(seen.text, _TITLE_CHARS))

    async def _call(self, what: str, fn: Any, **params: Any) -> None:
        try:
            await fn(**params)
        except (SlackApiError, *NETWORK) as exc:
            log.warning("slack: assistant.threads.%s failed (%s); the thread works without",
                        what, exc)
