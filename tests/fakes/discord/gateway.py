"""Discord's side of the gateway websocket, as discord.py speaks it.

A client connects with ``?v=10&encoding=json`` and, as discord.py always does, asks for
``compress=zlib-stream``: then every payload is one binary frame of a single zlib stream for
the connection, each ending in a ``Z_SYNC_FLUSH`` (``00 00 ff ff``). It gets HELLO (op 10),
heartbeats (op 1, answered with op 11), and IDENTIFY (op 2: token and intents checked, privileged
intents against the app's, answered with READY and one GUILD_CREATE per guild) or RESUME
(op 6: the session's dispatches after the client's ``seq`` replayed, then RESUMED). Dispatches
(op 0) carry an increasing ``s`` per session and are filtered by the session's intents as
Discord filters them: no guild messages without GUILD_MESSAGES, no content of others' guild
messages without MESSAGE_CONTENT unless the bot is mentioned.

The fake can ask for a reconnect (op 7), invalidate the session (op 9) or close the socket;
while no connection holds a session, its dispatches are kept and replayed on RESUME, as
Discord does (the missed events in order, then RESUMED:
https://discord.com/developers/docs/events/gateway#resuming). ``hold_resumes`` keeps a
RESUME waiting until ``release_resumes``: a client that took a while to come back, so that
what happens meanwhile is held for the session and replayed. Close codes are Discord's:
4001 unknown opcode, 4002 decode error, 4003 not authenticated, 4004 bad token, 4005
already identified, 4012 bad version, 4013 invalid intents, 4014 disallowed intents.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from . import payloads as p
from .payloads import JSON
from .world import World

HELLO, HEARTBEAT, IDENTIFY, PRESENCE, VOICE, RESUME, RECONNECT = 10, 1, 2, 3, 4, 6, 7
MEMBERS, INVALID_SESSION, HEARTBEAT_ACK, DISPATCH = 8, 9, 11, 0

_TRACE = ['["gateway-prd-fake-1",{"micros":800}]']
_CONTENT_FIELDS = {"content": "", "embeds": [], "attachments": [], "components": []}


@dataclass(frozen=True)
class Received:
    """One payload a client sent on the gateway."""

    connection: int
    op: int
    d: Any
    at: float


class Link:
    """One websocket connection; sends are serialised (one zlib stream, in order)."""

    def __init__(self, ws: web.WebSocketResponse, number: int, *, zlib_stream: bool,
                 url: str, resume_url: str) -> None:
        self.ws = ws
        self.number = number
        self.url = url
        """What the client connected to (``https://gateway.discord.gg/?v=10...`` over TLS)."""
        self.resume_url = resume_url
        """READY's ``resume_gateway_url`` for a session begun here: another host over TLS
        (as Discord's are), the ``/resume`` path on loopback."""
        self._z = zlib.compressobj() if zlib_stream else None
        self._lock = asyncio.Lock()
        self.session: Session | None = None

    async def send(self, payload: JSON) -> None:
        """Send if the socket is still open; a dispatch lost here is in the session's log,
        so the client gets it on RESUME (and a REST call that echoed it still succeeds)."""
        raw = json.dumps(payload, separators=(",", ":"))
        async with self._lock:
            if self.ws.closed:
                return
            try:
                if self._z is None:
                    await self.ws.send_str(raw)
                else:
                    data = self._z.compress(raw.encode()) + self._z.flush(zlib.Z_SYNC_FLUSH)
                    await self.ws.send_bytes(data)
            except ConnectionError:
                return


@dataclass
class Session:
    id: str
    intents: int
    seq: int = 0
    log: list[JSON] = field(default_factory=list)
    """Every dispatch of the session, in ``s`` order (what a RESUME replays from)."""
    link: Link | None = None
    replay_from: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def needed_intent(event: str, d: JSON) -> int:
    """The intent bit a session needs to be sent ``event`` (0: none)."""
    in_guild = bool(d.get("guild_id"))
    if event.startswith("MESSAGE_") and not event.startswith("MESSAGE_REACTION"):
        return p.GUILD_MESSAGES if in_guild else p.DIRECT_MESSAGES
    if event == "TYPING_START":
        return p.GUILD_MESSAGE_TYPING if in_guild else p.DIRECT_MESSAGE_TYPING
    if event.startswith(("GUILD_CREATE", "GUILD_UPDATE", "GUILD_DELETE", "CHANNEL_", "THREAD_")):
        return p.GUILDS
    if event.startswith("GUILD_MEMBER_") and event != "GUILD_MEMBERS_CHUNK":
        return p.GUILD_MEMBERS
    if event == "PRESENCE_UPDATE":
        return p.GUILD_PRESENCES
    return 0


def as_seen_by(event: str, d: JSON, intents: int, bot_id: str) -> JSON | None:
    """``d`` as a session with ``intents`` receives it, or None if it is not sent at all."""
    need = needed_intent(event, d)
    if need and not intents & need:
        return None
    if event in ("MESSAGE_CREATE", "MESSAGE_UPDATE") and not intents & p.MESSAGE_CONTENT:
        author = (d.get("author") or {}).get("id")
        mentioned = any(u.get("id") == bot_id for u in d.get("mentions", []))
        if d.get("guild_id") and author != bot_id and not mentioned:
            out = dict(d, **copy.deepcopy(_CONTENT_FIELDS))
            out.pop("poll", None)
            return out
    return d


class Gateway:
    """Connections, sessions, and every payload received."""

    def __init__(self, world: World, changed: asyncio.Condition, *,
                 heartbeat_interval: int) -> None:
        self.world = world
        self.heartbeat_interval = heartbeat_interval
        self.ack_heartbeats = True
        """False: heartbeats go unanswered (a zombied connection, as discord.py sees it)."""
        self.received: list[Received] = []
        self.identifies: list[JSON] = []
        self.resumes: list[JSON] = []
        self.refused: list[str] = []
        """Why connections were refused or closed by the fake (named in wait timeouts)."""
        self.links: list[Link] = []
        self.sessions: dict[str, Session] = {}
        self.current: Session | None = None
        self.remember: Callable[[JSON], None] = lambda d: None
        """Called with each INTERACTION_CREATE sent (the REST side accepts its callbacks)."""
        self.resumed_at: list[float] = []
        """When (``time.monotonic``) each RESUME was answered, its replay sent."""
        self._changed = changed
        self._resumes_open = asyncio.Event()
        self._resumes_open.set()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        compress = q.get("compress")
        if compress not in (None, "zlib-stream"):
            self.refused.append(f"compress={compress} (the fake speaks zlib-stream or none)")
            await self._notify()
            return web.Response(status=400, text=f"unsupported compression {compress}")
        ws = web.WebSocketResponse(compress=False, max_msg_size=0)
        await ws.prepare(request)
        resume_url = "wss://gateway-us-east1-b.discord.gg" if request.secure \
            else f"ws://{request.host}/resume"
        link = Link(ws, len(self.links) + 1, zlib_stream=compress == "zlib-stream",
                    url=str(request.url), resume_url=resume_url)
        self.links.append(link)
        try:
            if q.get("v") != str(p.API_VERSION):
                await self.close(link, 4012, "Invalid API version.")
            elif q.get("encoding", "json") != "json":
                await self.close(link, 4002, "the fake speaks encoding=json only")
            else:
                await link.send({"op": HELLO, "s": None, "t": None, "d": {
                    "heartbeat_interval": self.heartbeat_interval, "_trace": _TRACE}})
                async for frame in ws:
                    if frame.type == WSMsgType.TEXT:
                        await self._receive(link, frame.data)
                    elif frame.type == WSMsgType.BINARY:
                        await self.close(link, 4002, "Error while decoding payload.")
        finally:
            session = link.session
            if session is not None and session.link is link:
                session.link = None
            await self._notify()
        return ws

    async def close(self, link: Link, code: int, why: str) -> None:
        self.refused.append(f"connection {link.number} closed {code}: {why}")
        await link.ws.close(code=code, message=why.encode())

    async def _receive(self, link: Link, data: str) -> None:
        try:
            frame = json.loads(data)
            op = frame["op"]
        except (ValueError, TypeError, KeyError):
            await self.close(link, 4002, "Error while decoding payload.")
            return
        d = frame.get("d")
        self.received.append(Received(link.number, op, d, time.monotonic()))
        if op == HEARTBEAT:
            if self.ack_heartbeats:
                await link.send({"op": HEARTBEAT_ACK, "s": None, "t": None, "d": None})
        elif op == IDENTIFY:
            await self._identify(link, d or {})
        elif op == RESUME:
            await self._resume(link, d or {})
        elif op in (PRESENCE, VOICE, MEMBERS):
            if link.session is None:
                await self.close(link, 4003, "Not authenticated.")
            elif op == MEMBERS:
                await self._members(link.session, d or {})
        else:
            await self.close(link, 4001, "Unknown opcode.")
        await self._notify()

    async def _identify(self, link: Link, d: JSON) -> None:
        if link.session is not None:
            return await self.close(link, 4005, "Already authenticated.")
        if d.get("token") != self.world.token:
            return await self.close(link, 4004, "Authentication failed.")
        intents = d.get("intents")
        if not isinstance(intents, int) or not 0 <= intents < 1 << 26:
            return await self.close(link, 4013, "Invalid intent(s).")
        if intents & p.PRIVILEGED & ~self.world.privileged:
            return await self.close(link, 4014, "Disallowed intent(s).")
        session = Session(secrets.token_hex(16), intents)
        self.sessions[session.id] = session
        self.current = session
        session.link = link
        link.session = session
        world = self.world
        ready = p.ready(session.id, link.resume_url, world.user(world.bot_id), world.guild_ids,
                        world.application())
        shard = d.get("shard")
        if isinstance(shard, list):  # a sharded IDENTIFY is answered with its shard
            ready["shard"] = shard
        await self.emit(session, "READY", ready)
        for guild_id in world.guild_ids:
            await self.emit(session, "GUILD_CREATE", world.guild_create(guild_id))
        self.identifies.append(d)
        return None

    async def _resume(self, link: Link, d: JSON) -> None:
        if d.get("token") != self.world.token:
            return await self.close(link, 4004, "Authentication failed.")
        await self._resumes_open.wait()
        session = self.sessions.get(str(d.get("session_id")))
        if session is None:
            await link.send({"op": INVALID_SESSION, "s": None, "t": None, "d": False})
            return None
        async with session.lock:
            if session.link is not None and session.link is not link:
                await session.link.ws.close(code=4009, message=b"Session timed out.")
            session.link = link
            link.session = session
            start = session.replay_from if session.replay_from is not None else d.get("seq")
            session.replay_from = None
            for payload in session.log:
                if payload["s"] > (start or 0):
                    await link.send(payload)
            session.seq += 1
            await link.send({"op": DISPATCH, "t": "RESUMED", "s": session.seq,
                             "d": {"_trace": _TRACE}})
        self.current = session
        self.resumes.append(d)
        self.resumed_at.append(time.monotonic())
        return None

    async def _members(self, session: Session, d: JSON) -> None:
        guild_id = str(d.get("guild_id"))
        query = str(d.get("query") or "")
        wanted = {str(u) for u in d.get("user_ids") or []}
        members = [m for m in self.world.members(guild_id)
                   if (m["user"]["id"] in wanted if wanted
                       else m["user"]["username"].startswith(query))]
        limit = int(d.get("limit") or 0)
        chunk: JSON = {"guild_id": guild_id, "members": members[:limit] if limit else members,
                       "chunk_index": 0, "chunk_count": 1, "not_found": []}
        if d.get("nonce") is not None:
            chunk["nonce"] = d["nonce"]
        await self.emit(session, "GUILD_MEMBERS_CHUNK", chunk)

    async def emit(self, session: Session, event: str, d: JSON) -> int | None:
        """Log a dispatch in ``session`` and send it if a connection holds the session.

        Returns its ``s``, or None when the session's intents exclude it."""
        seen = as_seen_by(event, d, session.intents, self.world.bot_id)
        if seen is None:
            return None
        if event == "INTERACTION_CREATE":
            self.remember(seen)
        async with session.lock:
            session.seq += 1
            payload = {"op": DISPATCH, "t": event, "s": session.seq, "d": copy.deepcopy(seen)}
            session.log.append(payload)
            if session.link is not None:
                await session.link.send(payload)
            return session.seq

    # -- what the fake does to the live connection

    def live(self) -> Link | None:
        session = self.current
        return None if session is None else session.link

    async def reconnect(self, replay_from: int | None) -> None:
        """Op 7; the session's dispatches are held until the client RESUMEs."""
        link, session = self._live()
        session.replay_from = replay_from
        session.link = None
        await link.send({"op": RECONNECT, "s": None, "t": None, "d": None})

    async def invalidate(self, resumable: bool) -> None:
        link, session = self._live()
        session.link = None
        if not resumable:
            self.sessions.pop(session.id, None)
            self.current = None
        await link.send({"op": INVALID_SESSION, "s": None, "t": None, "d": resumable})

    async def drop(self, code: int) -> None:
        link, session = self._live()
        session.link = None
        await link.ws.close(code=code, message=b"closed by the fake")

    def hold_resumes(self) -> None:
        """Keep every RESUME waiting (nothing replayed, the session held by no connection)
        until ``release_resumes``."""
        self._resumes_open.clear()

    def release_resumes(self) -> None:
        self._resumes_open.set()

    def held(self) -> Session | None:
        """The current session while resumes are held and no connection holds it: what is
        dispatched to it now is replayed on its RESUME."""
        session = self.current
        if self._resumes_open.is_set() or session is None or session.link is not None:
            return None
        return session

    def _live(self) -> tuple[Link, Session]:
        session = self.current
        if session is None or session.link is None:
            raise RuntimeError("no gateway connection holds a session")
        return session.link, session

    async def shutdown(self) -> None:
        for link in self.links:
            if not link.ws.closed:
                await link.ws.close(code=1001, message=b"server shutdown")
