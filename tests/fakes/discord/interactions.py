"""Answers to interactions: the callback, the original response, follow-ups; components.

An interaction is known once the fake has dispatched its INTERACTION_CREATE (``remember``);
its callback must name that id and token, and may be made once (a second gets ``40060``). The
callback types a bot uses for buttons are carried out: 4 posts a message, 5 posts a "thinking"
one (flag LOADING), 6 acknowledges silently, 7 edits the clicked message; ``flags`` 64 makes a
posted message ephemeral (kept apart from the channel's history). The original response and
follow-ups are then reached with the interaction token under ``/webhooks/{application_id}``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import payloads as p
from .payloads import EPHEMERAL, JSON, LOADING
from .store import DiscordError, form_error, unknown

if TYPE_CHECKING:
    from .rest import Answer, Request, RestAPI

_CALLBACK_TYPES = (4, 5, 6, 7, 8, 9)
_TRUE = ("1", "true", "True")


@dataclass(frozen=True)
class InteractionResponse:
    """One interaction callback as the fake received and carried it out."""

    interaction_id: str
    type: int
    data: JSON | None
    ephemeral: bool
    custom_id: str | None
    message: JSON | None
    """The message the response posted or edited (6: the clicked message, unchanged)."""


@dataclass
class _Pending:
    data: JSON
    at: float
    response: int | None = None
    original: tuple[str, str] | None = None
    follow_ups: set[str] = field(default_factory=set)


class Interactions:
    def __init__(self, rest: RestAPI, *, deadline: float) -> None:
        self.rest = rest
        self.deadline = deadline
        """Seconds after INTERACTION_CREATE within which the first callback must come: after
        it, Discord answers ``10062 Unknown interaction`` (its rule is 3 seconds)."""
        self.responses: list[InteractionResponse] = []
        self._pending: dict[str, _Pending] = {}

    def remember(self, data: JSON) -> None:
        """Note an INTERACTION_CREATE the fake dispatched, so its callbacks are accepted."""
        self._pending.setdefault(str(data["id"]), _Pending(copy.deepcopy(data), time.monotonic()))

    def _meta(self, pending: _Pending) -> JSON:
        d = pending.data
        meta: JSON = {"id": d["id"], "type": d["type"],
                      "user": d.get("user") or d["member"]["user"],
                      "authorizing_integration_owners": d.get("authorizing_integration_owners",
                                                              {})}
        if "message" in d:
            meta["interacted_message_id"] = d["message"]["id"]
        app_id = self.rest.world.app_id
        return {"webhook_id": app_id, "application_id": app_id, "interaction_metadata": meta}

    async def _post(self, pending: _Pending, body: JSON, files: list[JSON], *,
                    flags: int) -> JSON:
        channel_id = str(pending.data["channel_id"])
        msg = self.rest.bot_message(channel_id, body, files, flags=flags,
                                    extra=self._meta(pending))
        self.rest.store.create(msg)
        if not flags & EPHEMERAL:
            await self.rest.posted(msg)
        return msg

    async def callback(self, req: Request) -> Answer:
        pending = self._pending.get(req.params["interaction_id"])
        if pending is None or pending.data["token"] != req.params["token"]:
            raise unknown("interaction")
        if pending.response is None and time.monotonic() - pending.at > self.deadline:
            raise unknown("interaction")
        if pending.response is not None:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        body = req.body or {}
        kind = body.get("type")
        if kind not in _CALLBACK_TYPES:
            raise form_error("type", "BASE_TYPE_CHOICES",
                             f"Value must be one of {set(_CALLBACK_TYPES)}.")
        data: JSON = body.get("data") or {}
        if (kind == 8) != (pending.data.get("type") == 4):
            raise DiscordError(400, 50035, "Invalid Form Body: an autocomplete interaction "
                                           "takes choices (type 8), and only it")
        flags = int(data.get("flags", 0))
        ephemeral = bool(flags & EPHEMERAL)
        clicked = pending.data.get("message")
        message: JSON | None = None
        if kind == 4:
            message = await self._post(pending, data, req.files, flags=flags)
        elif kind == 5:
            message = await self._thinking(pending, flags & EPHEMERAL)
        elif kind == 6:
            message = clicked
        elif kind == 7:
            message = await self._update_clicked(pending, data)
        pending.response = kind
        if message is not None:
            pending.original = (str(message["channel_id"]), str(message["id"]))
        custom = (pending.data.get("data") or {}).get("custom_id")
        self.responses.append(InteractionResponse(
            str(pending.data["id"]), kind, copy.deepcopy(body.get("data")), ephemeral, custom,
            copy.deepcopy(message)))
        if req.query.get("with_response") not in _TRUE:
            return 204, None
        out: JSON = {"interaction": {
            "id": pending.data["id"], "type": pending.data["type"],
            "response_message_loading": kind == 5, "response_message_ephemeral": ephemeral}}
        if message is not None and kind in (4, 5, 7):
            out["interaction"]["response_message_id"] = message["id"]
            out["resource"] = {"type": kind, "message": message}
        return 200, out

    async def _thinking(self, pending: _Pending, ephemeral: int) -> JSON:
        """Type 5: Discord posts "<bot> is thinking..." (content empty, flag LOADING)."""
        channel_id = str(pending.data["channel_id"])
        msg = p.message(p.new_id(), channel_id, self.rest.world.user(self.rest.world.bot_id), "",
                        flags=LOADING | ephemeral)
        msg.update(self._meta(pending))
        self.rest.store.create(msg)
        if not ephemeral:
            await self.rest.posted(msg)
        return msg

    async def _update_clicked(self, pending: _Pending, data: JSON) -> JSON:
        clicked: JSON = pending.data["message"]
        channel_id = str(clicked["channel_id"])
        if self.rest.store.find(channel_id, clicked["id"], ephemeral=True) is None:
            # a message the fake never stored (a test built it): answer with an edited copy
            fields = self.rest.message_fields(data, partial=True, channel_id=channel_id)
            return dict(clicked, **fields, edited_timestamp=p.now_iso())
        edited = self.rest.edit_message(channel_id, clicked["id"], data, ephemeral=True)
        if not edited["flags"] & EPHEMERAL:
            await self.rest.echo("MESSAGE_UPDATE", self.rest.for_gateway(edited))
        return edited

    # -- /webhooks/{application_id}/{token}: the original response and follow-ups

    def _by_token(self, req: Request) -> _Pending:
        if req.params["application_id"] == self.rest.world.app_id:
            for pending in self._pending.values():
                if pending.data["token"] == req.params["token"]:
                    return pending
        raise unknown("Webhook")

    def _target(self, req: Request) -> tuple[_Pending, str, str]:
        pending = self._by_token(req)
        message_id = req.params["message_id"]
        if message_id == "@original" and pending.original is not None:
            return pending, *pending.original
        if message_id in pending.follow_ups:
            return pending, str(pending.data["channel_id"]), message_id
        raise unknown("Message")

    async def follow_up(self, req: Request) -> Answer:
        pending = self._by_token(req)
        if pending.response is None:
            raise unknown("Webhook")
        body = req.body or {}
        msg = await self._post(pending, body, req.files, flags=int(body.get("flags", 0)))
        pending.follow_ups.add(msg["id"])
        if pending.original is None:
            pending.original = (msg["channel_id"], msg["id"])
        return (200, msg) if req.query.get("wait") in _TRUE else (204, None)

    async def get(self, req: Request) -> Answer:
        _, channel_id, message_id = self._target(req)
        return 200, self.rest.store.get(channel_id, message_id, ephemeral=True)

    async def edit(self, req: Request) -> Answer:
        _, channel_id, message_id = self._target(req)
        stored = self.rest.store.get(channel_id, message_id, ephemeral=True)
        body = dict(req.body or {})
        if stored["flags"] & LOADING:  # the "thinking" message becomes the answer
            body["flags"] = stored["flags"] & ~LOADING
        edited = self.rest.edit_message(channel_id, message_id, body, ephemeral=True)
        if not edited["flags"] & EPHEMERAL:
            await self.rest.echo("MESSAGE_UPDATE", self.rest.for_gateway(edited))
        return 200, edited

    async def delete(self, req: Request) -> Answer:
        _, channel_id, message_id = self._target(req)
        ephemeral = self.rest.store.find(channel_id, message_id, ephemeral=False) is None
        self.rest.store.delete(channel_id, message_id, ephemeral=True)
        if not ephemeral:
            await self.rest.deleted(channel_id, message_id)
        return 204, None


def check_components(rows: list[Any]) -> list[JSON]:
    """Check action rows of buttons and selects as Discord does; number components (``id``)."""
    if len(rows) > 5:
        raise form_error("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    out = copy.deepcopy(rows)
    counter = 0
    for r, row in enumerate(out):
        counter += 1
        row.setdefault("id", counter)
        if row.get("type") != 1:
            continue  # components v2 layouts: taken as they are
        children = row.get("components") or []
        if not 1 <= len(children) <= 5:
            raise form_error(f"components.{r}.components", "BASE_TYPE_BAD_LENGTH",
                             "Must be between 1 and 5 in length.")
        for c, child in enumerate(children):
            counter += 1
            child.setdefault("id", counter)
            _check_child(child, f"components.{r}.components.{c}")
    return out


def _check_child(child: JSON, where: str) -> None:
    link = child.get("type") == 2 and child.get("style") == 5
    custom_id = child.get("custom_id")
    if child.get("type") == 2 and child.get("style") not in (1, 2, 3, 4, 5, 6):
        raise form_error(f"{where}.style", "BASE_TYPE_CHOICES",
                         "Value must be one of {1, 2, 3, 4, 5, 6}.")
    if link and not child.get("url"):
        raise form_error(f"{where}.url", "BASE_TYPE_REQUIRED", "This field is required")
    if not link and child.get("style") != 6:
        if not custom_id:
            raise form_error(f"{where}.custom_id", "BASE_TYPE_REQUIRED",
                             "This field is required")
        if len(str(custom_id)) > 100:
            raise form_error(f"{where}.custom_id", "BASE_TYPE_MAX_LENGTH",
                             "Must be 100 or fewer in length.")
    if len(str(child.get("label") or "")) > 80:
        raise form_error(f"{where}.label", "BASE_TYPE_MAX_LENGTH",
                         "Must be 80 or fewer in length.")
