"""Answers to interactions: the callback, the original response, follow-ups; components.

An interaction is known once the fake has dispatched its INTERACTION_CREATE (``remember``);
its callback must name that id and token, come within the deadline (else ``10062``), be made
once (a second gets ``40060``) and be of a type that interaction takes (``_TAKES``). The body's
shape is the contract's (``appshapes.py``). Carried out: 4 posts a message, 5 posts a
"thinking" one (flag LOADING), 6 acknowledges silently, 7 edits the clicked message, 8 (the
choices) and 9 (a modal) are recorded; ``flags`` 64 makes a posted message ephemeral (kept
apart from the channel's history). The original response and follow-ups are then reached
with the interaction token under ``/webhooks/{application_id}``; a follow-up to a deferred
response edits its "thinking" message instead, as Discord does for backwards compatibility.
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

_TRUE = ("1", "true", "True")
_TAKES = {2: (4, 5, 9), 3: (4, 5, 6, 7, 9), 4: (8,), 5: (4, 5, 6, 7)}
"""The callback types each interaction type takes (receiving-and-responding#interaction-
response-object-interaction-callback-type: 6 and 7 "Only valid for component-based
interactions", 8 answers autocomplete, 9 "Not available for MODAL_SUBMIT and PING"); 10 and 12
want monetization or an Activity, which the fake's app has not."""


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
    edited: bool = False
    """Whether the original response was edited (a 6 shows nothing until it is)."""
    follow_ups: list[str] = field(default_factory=list)


class Interactions:
    def __init__(self, rest: RestAPI, *, deadline: float) -> None:
        self.rest = rest
        self.deadline = deadline
        """Seconds after INTERACTION_CREATE within which the first callback must come: after
        it, Discord answers ``10062 Unknown interaction`` (its rule is 3 seconds: "you must
        send an initial response within 3 seconds of receiving the event. If the 3 second
        deadline is exceeded, the token will be invalidated", receiving-and-responding#
        responding-to-an-interaction). Counted from the dispatch's creation, so one held
        for a RESUME and replayed late is refused as well."""
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
        pending = self._pending.get(req.params["webhook_id"])
        if pending is None or pending.data["token"] != req.params["webhook_token"]:
            raise unknown("interaction")
        if pending.response is None and time.monotonic() - pending.at > self.deadline:
            raise unknown("interaction")
        if pending.response is not None:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        body = req.body or {}
        kind = body["type"]
        takes = _TAKES.get(pending.data["type"], ())
        if kind not in takes:
            raise form_error("type", "BASE_TYPE_CHOICES", "Value must be one of "
                             f"({', '.join(map(str, takes))}) for this interaction.")
        data: JSON = body.get("data") or {}
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
        if message is not None and kind in (4, 7):  # "Only present if type is" 4 or 7
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
        if req.params["webhook_id"] == self.rest.world.app_id:
            for pending in self._pending.values():
                if pending.data["token"] == req.params["webhook_token"]:
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
        thinking = self._thinking_message(pending)
        if thinking is not None:  # acts as an edit of the original; its flags stay
            return 200, await self._edit(*thinking, {k: v for k, v in body.items()
                                                     if k != "flags"})
        msg = await self._post(pending, body, req.files, flags=int(body.get("flags", 0)))
        pending.follow_ups.append(msg["id"])
        if pending.original is None:
            pending.original = (msg["channel_id"], msg["id"])
        return 200, msg  # "Functions the same as Execute Webhook, but wait is always true"

    async def get(self, req: Request) -> Answer:
        _, channel_id, message_id = self._target(req)
        return 200, self.rest.store.get(channel_id, message_id, ephemeral=True)

    def _thinking_message(self, pending: _Pending) -> tuple[str, str] | None:
        """The deferred response's message while it is still "thinking"."""
        if pending.response != 5 or pending.original is None:
            return None
        found = self.rest.store.find(*pending.original, ephemeral=True)
        return pending.original if found is not None and found["flags"] & LOADING else None

    async def edit(self, req: Request) -> Answer:
        pending, channel_id, message_id = self._target(req)
        edited = await self._edit(channel_id, message_id, req.body or {})
        pending.edited |= (channel_id, message_id) == pending.original
        return 200, edited

    def shown(self, interaction_id: str) -> list[JSON]:
        """What the person was shown in answer to an interaction, as stored now: its
        original response (once it is more than "thinking", and for a 6 once edited), then
        its follow-ups. Nothing for one whose callback Discord refused."""
        pending = self._pending.get(interaction_id)
        if pending is None or pending.response is None:
            return []
        found = [self.rest.store.find(*pending.original, ephemeral=True)
                 if pending.original is not None and (pending.response != 6 or pending.edited)
                 else None]
        channel_id = str(pending.data["channel_id"])
        found += [self.rest.store.find(channel_id, m, ephemeral=True) for m in pending.follow_ups]
        return [copy.deepcopy(m) for m in found if m is not None and not m["flags"] & LOADING]

    async def _edit(self, channel_id: str, message_id: str, change: JSON) -> JSON:
        stored = self.rest.store.get(channel_id, message_id, ephemeral=True)
        body = dict(change)
        if stored["flags"] & LOADING:  # the "thinking" message becomes the answer
            body["flags"] = stored["flags"] & ~LOADING
        edited = self.rest.edit_message(channel_id, message_id, body, ephemeral=True)
        if not edited["flags"] & EPHEMERAL:
            await self.rest.echo("MESSAGE_UPDATE", self.rest.for_gateway(edited))
        return edited

    async def delete(self, req: Request) -> Answer:
        _, channel_id, message_id = self._target(req)
        ephemeral = self.rest.store.find(channel_id, message_id, ephemeral=False) is None
        self.rest.store.delete(channel_id, message_id, ephemeral=True)
        if not ephemeral:
            await self.rest.deleted(channel_id, message_id)
        return 204, None


def numbered(components: list[Any]) -> list[JSON]:
    """Components as Discord stores them: each (nested ones too) with an ``id``, "generated
    sequentially if left empty" and never one the message already uses; 0 counts as empty
    (components/reference#anatomy-of-a-component)."""
    out = copy.deepcopy(components)
    every = _every(out)
    used = {c["id"] for c in every if c.get("id")}
    counter = 0
    for c in every:
        if not c.get("id"):
            counter += 1
            while counter in used:
                counter += 1
            c["id"] = counter
    return out


def _every(components: list[Any]) -> list[JSON]:
    found = []
    for c in components:
        found.append(c)
        inner = c.get("accessory")
        found += _every([inner] if isinstance(inner, dict) else c.get("components") or [])
    return found
