"""Slack's side of Socket Mode: the websocket that ``apps.connections.open`` hands out.

A client connects with a single-use ticket, gets ``hello``, then envelopes (``events_api``,
``interactive``) which it acks by sending ``{"envelope_id": ...}`` back. ``disconnect`` asks it
to fetch a new URL and reconnect (slack-sdk reconnects at once on it). Sends go to the newest
connection that has not been asked to leave, or to the one a test names (``to``: the
``to``-th live connection, oldest first: Slack may deliver to any of an app's connections);
waits are on a condition, never on sleeps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

from aiohttp import WSCloseCode, WSMsgType, web

from . import payloads
from .store import JSON

HOST = "applink-fake-1"


class SocketMode:
    """Connections, envelopes sent, acks received."""

    def __init__(self, app_id: str, changed: asyncio.Condition) -> None:
        self.app_id = app_id
        self.opened = 0
        """Connections accepted so far (each got ``hello``)."""
        self.received: list[JSON] = []
        """Frames from the client that were not acks."""
        self.sent: dict[str, JSON] = {}
        """Envelopes by id, in sending order."""
        self.acks: dict[str, JSON] = {}
        self._tickets: set[str] = set()
        self._live: list[web.WebSocketResponse] = []
        self._leaving: set[web.WebSocketResponse] = set()
        self._changed = changed

    def issue_ticket(self) -> str:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return ticket

    @property
    def live(self) -> int:
        return len(self._live)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid or used ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json(payloads.hello(self.app_id, len(self._live) + 1, HOST))
        self.opened += 1
        self._live.append(ws)
        await self._notify()
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    await self._receive(frame.data)
        finally:
            self._live.remove(ws)
            self._leaving.discard(ws)
            await self._notify()
        return ws

    async def _receive(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except ValueError:
            frame = {"raw": data}
        if isinstance(frame, dict) and "envelope_id" in frame:
            self.acks[str(frame["envelope_id"])] = frame
        else:
            self.received.append(frame if isinstance(frame, dict) else {"raw": frame})
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (with no deadline of its own: the caller sets one) until ``predicate()``."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    def _targets(self) -> list[web.WebSocketResponse]:
        return [ws for ws in self._live if ws not in self._leaving and not ws.closed]

    async def _current(self, to: int | None = None) -> web.WebSocketResponse:
        await self.until(lambda: len(self._targets()) > (to or 0))
        return self._targets()[-1 if to is None else to]

    async def send_envelope(self, envelope: JSON, *, to: int | None = None) -> str:
        ws = await self._current(to)
        envelope_id = str(envelope["envelope_id"])
        self.sent[envelope_id] = envelope
        await ws.send_json(envelope)
        return envelope_id

    async def disconnect(self, reason: str) -> None:
        ws = await self._current()
        self._leaving.add(ws)
        await ws.send_json(payloads.disconnect(reason, self.app_id, len(self._live), HOST))

    async def close(self) -> None:
        """Close the current connection from Slack's side (a dropped link)."""
        ws = await self._current()
        self._leaving.add(ws)
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"fake closed the link")

    async def shutdown(self) -> None:
        for ws in list(self._live):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
