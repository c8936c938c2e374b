"""The approve / deny buttons of a Slack approval prompt, on its message or on the App Home
tab: only that run's own prompt decides it (``channels.clicks``), by someone with the
right at the run's place; the runtime then checks ``approvers`` again."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime import MaidenError, RunError, Runtime

from ..access import Place
from ..clicks import FOREIGN, Bound, bind, run_place
from ..prompts import refusal_text
from .config import SlackConfig
from .home import AppHome
from .mapping import read_click
from .render import decided_blocks, parse_choice

__all__ = ["ApprovalButtons"]


class ApprovalButtons:
    """``maiden_approve`` and ``maiden_deny`` clicked, for one channel named ``via``."""

    def __init__(self, runtime: Runtime, config: SlackConfig, client: AsyncWebClient,
                 home: AppHome, *, via: str) -> None:
        self._runtime = runtime
        self._config = config
        self._client = client
        self._home = home
        self._via = via

    async def clicked(self, ack: Callable[[], Awaitable[None]], body: dict[str, Any],
                      action: dict[str, Any]) -> None:
        await ack()
        choice = parse_choice(action)
        user = str((body.get("user") or {}).get("id") or "")
        if choice is None or not user:
            return
        approve, ids = choice
        click = read_click(body)
        home = (body.get("container") or {}).get("type") == "view"
        if home:  # the App Home tab: buttons of approvals the person may decide
            bound = await self._from_home(user, ids["run"])
        elif click is None:
            return
        else:  # on a message: only that run's own prompt for that call decides it
            bound = await bind(self._runtime, self._config.access, click, ids["run"],
                               right="approve", call=ids["call"])
        channel = click.channel if click else \
            bound.run.origin.target.get("channel", "") if isinstance(bound, Bound) else ""
        if isinstance(bound, str):
            await self._tell(channel, user, bound)
            return
        # The rules at the run's place decided first; the runtime then checks
        # ``approvers`` (or [agent] approvers) again.
        approvers = self._config.approvers or None
        try:
            await self._runtime.decide(bound.run.id, ids["call"], approve=approve, by=user,
                                       arguments_hash=ids["hash"], approvers=approvers)
        except RunError as exc:
            what = "decide approvals" if exc.reason == "not_an_approver" else None
            await self._tell(channel, user,
                             refusal_text(what) if what else f"That did not work: {exc}")
            return
        if home:
            await self._home.publish(user)
        elif click is not None:
            with contextlib.suppress(SlackApiError):
                await self._client.chat_update(
                    channel=click.channel, ts=click.message,
                    text=f"{'Approved' if approve else 'Denied'}: {ids.get('name', '')}",
                    blocks=decided_blocks(ids.get("name", "the call"), approve, user))

    async def _from_home(self, user: str, run_id: str) -> Bound | str:
        """A decision from the App Home tab (no message to bind it to): the tab lists only
        what the person may decide, and the rights are judged again at the run's place."""
        try:
            run = await self._runtime.records.get_run(run_id)
        except MaidenError:
            return FOREIGN
        channel = run.origin.target.get("channel", "")
        place = run_place(run, Place.of(channel, direct=channel.startswith("D")))
        if run.origin.channel != self._via or \
                not self._config.access.allows(user, place, "approve"):
            return refusal_text("decide approvals")
        return Bound(run, place)

    async def _tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral line in ``channel`` (none for a refused click on the App Home tab)."""
        if channel:
            with contextlib.suppress(SlackApiError):
                await self._client.chat_postEphemeral(channel=channel, user=user, text=text)
