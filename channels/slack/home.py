"""The App Home tab: what one person may see and do, published with ``views.publish`` when
they open it (``app_home_opened``) and again when something on it changes (a run of
theirs ends, an approval they may decide comes or goes), at most every ``EVERY_S``.

It shows their recent threads with the agent, the approvals they may decide (with the
same Approve / Deny buttons as a prompt), the schedules they may operate, and this week's
usage; everything read through the runtime's public API and the app's schedules."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import (
    ApprovalDelivery,
    ApprovalRequested,
    RunEnded,
    RunEvent,
    Runtime,
    ScheduleService,
)

from ..access import Place
from ..work import Background
from .config import SlackConfig
from .render import approval_blocks

__all__ = ["EVERY_S", "AppHome"]

log = logging.getLogger("maiden.slack")

EVERY_S = 5.0
"""The least time between two publishes of one person's Home tab."""
RECENT = 5
APPROVALS_SHOWN = 20
"""Approvals listed (two blocks each); the rest are counted. A Home tab takes at most 100
blocks (docs.slack.dev/reference/block-kit/blocks): with the threads, the schedules and the
headers, the tab stays under it however much waits."""
SCHEDULES_SHOWN = 30
WEEK_S = 7 * 86_400


class AppHome:
    """Publishes each person's Home tab; ``watch`` keeps the open ones current."""

    def __init__(self, runtime: Runtime, config: SlackConfig, client: AsyncWebClient,
                 schedules: ScheduleService | None, background: Background) -> None:
        self.runtime = runtime
        self.config = config
        self.client = client
        self.schedules = schedules
        self.background = background
        self._seen: dict[str, float] = {}
        """Who opened the tab, and when it was last published for them."""
        self._due: set[str] = set()
        self._watching = False

    async def opened(self, event: dict[str, Any]) -> None:
        """``app_home_opened`` on the Home tab: publish it now."""
        if event.get("tab") not in (None, "home"):
            return
        user = str(event.get("user") or "")
        if user:
            await self.publish(user)
            if not self._watching:  # nobody's tab to keep current until one is opened
                self._watching = True
                self.background.spawn(self.watch())

    async def publish(self, user: str) -> None:
        self._seen[user] = time.monotonic()
        try:
            await self.client.views_publish(user_id=user, view={
                "type": "home", "blocks": await self.blocks(user)})
        except SlackApiError as exc:
            log.warning("slack: the Home tab of %s was not published: %s", user, exc)

    async def watch(self) -> None:
        """Until cancelled: republish the tabs a run's end or an approval may change."""
        async with self.runtime.subscribe() as events:
            while True:
                event: RunEvent = await events.next()
                if isinstance(event, RunEnded | ApprovalRequested):
                    for user in list(self._seen):
                        self._soon(user)

    def _soon(self, user: str) -> None:
        if user in self._due:
            return
        self._due.add(user)

        async def later() -> None:
            wait = self._seen.get(user, 0.0) + EVERY_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._due.discard(user)
            await self.publish(user)

        self.background.spawn(later())

    # -- what the tab shows

    async def blocks(self, user: str) -> list[dict[str, Any]]:
        runs = await self.runtime.records.runs()
        mine = [r for r in runs if r.origin.channel == "slack" and r.origin.user == user]
        blocks: list[dict[str, Any]] = [_header("Your recent threads")]
        threads: dict[str, Any] = {}
        for run in reversed(mine):
            threads.setdefault(run.thread_id, run)
        for run in list(threads.values())[:RECENT]:
            where = run.origin.target.get("channel", "")
            blocks.append(_text(f"<#{where}> · {run.state.value.replace('_', ' ')} · "
                                f"{_preview(run.text)}" if where else _preview(run.text)))
        if not threads:
            blocks.append(_text("_No threads with you yet: mention the bot, or DM it._"))
        blocks += await self._approvals(user)
        blocks += await self._schedules(user)
        week = [r for r in mine if r.created_at >= time.time() - WEEK_S]
        tokens = sum(r.usage.total_tokens for r in week)
        blocks += [_header("This week"),
                   _text(f"{len(week)} run(s), {tokens:,} tokens, "
                         f"${sum(r.cost_usd for r in week):.4f}")]
        return blocks

    async def _approvals(self, user: str) -> list[dict[str, Any]]:
        out: list[list[dict[str, Any]]] = []
        for run in await self.runtime.records.pending_approvals(channel="slack"):
            pending = run.pending_approval
            channel = run.origin.target.get("channel", "")
            place = Place.of(channel, direct=channel.startswith("D"))
            if pending is None or not self.config.access.allows(user, place, "approve"):
                continue
            prompt = ApprovalDelivery(
                key=f"home:{run.id}", run_id=run.id, thread_id=run.thread_id, channel="slack",
                target=run.origin.target, tool_call_id=pending.tool_call_id, name=pending.name,
                arguments=pending.arguments, arguments_hash=pending.arguments_hash,
                reason=pending.reason, asked_by=pending.asked_by)
            out.append([_text(f"*{pending.name}* in <#{channel}> waits for a person"),
                        approval_blocks(prompt)[-1]])  # the same Approve / Deny buttons
        if not out:
            return []
        shown = [block for pair in out[:APPROVALS_SHOWN] for block in pair]
        return [_header("Approvals you may decide"), *shown,
                *_more(len(out) - APPROVALS_SHOWN, "on the console's approvals page")]

    async def _schedules(self, user: str) -> list[dict[str, Any]]:
        if self.schedules is None:
            return []
        lines: list[dict[str, Any]] = []
        for schedule in await self.schedules.listing():
            target = str(schedule.get("deliver") or "")
            channel = target.split(":")[1] if target.startswith("slack:") else "dm"
            place = Place.of(channel, direct=channel == "dm")
            if self.config.access.allows(user, place, "operate"):
                fires = schedule.get("next_fires") or []
                paused = " (paused)" if schedule.get("paused") else ""
                lines.append(_text(f"`{schedule.get('name')}`{paused} · next "
                                   f"{fires[0] if fires else '-'} · last "
                                   f"{schedule.get('outcome') or '-'}"))
        if not lines:
            return []
        return [_header("Schedules you may operate"), *lines[:SCHEDULES_SHOWN],
                *_more(len(lines) - SCHEDULES_SHOWN, "with `/maiden schedules`")]


def _more(hidden: int, where: str) -> list[dict[str, Any]]:
    """A line saying how many were left out, and where they are all listed."""
    return [_text(f"_… and {hidden} more, {where}_")] if hidden > 0 else []


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def _preview(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(files)"
    return line if len(line) <= 80 else line[:79] + "…"


