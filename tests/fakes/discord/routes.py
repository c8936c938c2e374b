"""The REST side's plumbing: match a request to a route, hold it to the contract, play faults.

Every request is recorded as a ``Call`` (with the status answered). A route is Discord's
template as discord.py names it (``/channels/{channel_id}/messages``); a fault or ``calls``
filter names one as ``"METHOD /path"`` where a ``{...}`` segment matches any id and a literal
id only itself. Each route the fake serves is answered only under its entry in
``contract.CONTRACT``: the entry says whether it wants the bot token, and its body, query and
files are checked (``contract.check``) before the handler runs. ``served`` notes every route
answered; ``uncovered`` every request that found no entry (a route served without one, or a
path the fake does not serve at all), answered 404; ``undocumented`` an error code a handler
gave that its entry does not list.

Every answer has ``Via`` (discord.py takes a 429 without it for a Cloudflare ban) and, on
known routes, ``X-RateLimit-*`` headers of a bucket that is never exhausted: the fake
rate-limits only when a 429 is queued or ``message_limit`` is passed, and then answers as
https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit shows: body
``message``, ``retry_after`` (seconds, a float) and ``global``; ``Retry-After`` (whole
seconds, rounded up), ``X-RateLimit-Scope`` (``user``, ``global`` or ``shared``), and for a
global limit ``X-RateLimit-Global`` without the route's bucket headers.

``outage`` is a switch for a while rather than a queue (``FakeDiscord.misbehave``): every
request answered with a status (a 429 as above, or a 5xx: discord.py retries 500, 502, 504
and 524), or answered ``delay_s`` late, or Discord down (the connection closed unanswered).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import md5
from typing import Any, Literal

import aiohttp
from aiohttp import web

from . import contract
from . import payloads as p
from .payloads import JSON
from .rest import Handler, Request, RestAPI
from .store import DiscordError

PREFIX = "/api/v10"
REQUEST_LIMIT = 25 * 1024 * 1024
"""resources/message#create-message-limitations: "The maximum request size when sending a
message is 25 MiB" (each file within it at most 10 MiB: ``contract.FILE_LIMIT``)."""
Scope = Literal["user", "global", "shared"]


@dataclass(frozen=True)
class Fault:
    """One planned failure of a route (see ``FakeDiscord.fail``)."""

    status: int | None = None
    retry_after: float = 0.1
    drop: bool = False
    scope: Scope = "user"


@dataclass(frozen=True)
class Outage:
    """Discord misbehaving for a while: ``mode`` "status" (every request answered
    ``status``), "slow" (``delay_s`` late) or "down"; until ``until`` (time.monotonic())."""

    mode: str
    until: float
    status: int = 500
    retry_after: float = 1.0
    delay_s: float = 2.0


@dataclass
class Call:
    """One REST request as the fake received it, and the status it answered."""

    method: str
    path: str
    """Below ``/api/v10``, with real ids: ``/channels/123/messages``."""
    route: str | None
    """The route template it matched: ``/channels/{channel_id}/messages``."""
    query: dict[str, str]
    json: Any
    headers: dict[str, str]
    at: float
    status: int = 0
    answer: Any = None
    """The JSON answered (None for 204, or a dropped answer's)."""
    dropped: bool = False


def route_pattern(route: str) -> tuple[str, re.Pattern[str]]:
    """``"POST /channels/{id}/messages"`` -> method and a path regex (``{...}``: any segment)."""
    method, _, path = route.strip().partition(" ")
    if not path.startswith("/"):
        raise ValueError(f"a route is 'METHOD /path', got {route!r}")
    path = path.removeprefix(PREFIX)
    parts = re.split(r"(\{[^}]*\})", path)
    regex = "".join("[^/]+" if x.startswith("{") else re.escape(x) for x in parts)
    return method.upper(), re.compile(regex + r"\Z")


def _template(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]*\})", template)
    return re.compile("".join(f"(?P<{x[1:-1]}>[^/]+)" if x.startswith("{") else re.escape(x)
                              for x in parts) + r"\Z")


class Router:
    """Requests in, answers out; ``requests`` and queued faults kept for the test."""

    def __init__(self, rest: RestAPI, gateway_url: Callable[[], str]) -> None:
        self.rest = rest
        self.gateway_url = gateway_url
        self.requests: list[Call] = []
        self._faults: dict[str, tuple[str, re.Pattern[str], deque[Fault]]] = {}
        self.message_limit: tuple[int, float] | None = None
        """(n, seconds): at most n message sends and edits per channel in any window of
        that many seconds, as Discord's per-channel bucket (5 per 5 s); past it, 429 with
        Retry-After. None: no limit."""
        self._sent: dict[str, deque[float]] = {}
        self.after_call: dict[str, Callable[[int], None]] = {}
        """``"PATCH /channels/{channel_id}/messages/{message_id}"`` (a route template) ->
        called with how many calls of it there have been, each time one has been carried
        out, before it is answered (e.g. to kill a process mid-stream)."""
        self.limited: dict[str, int] = {}
        """How many 429s the limit answered, per channel id."""
        self._routes = [(m, _template(t), t, h) for m, t, h in rest.table()]
        self.served: set[tuple[str, str]] = set()
        """Every (method, route template) the fake answered under its contract entry."""
        self.uncovered: set[tuple[str, str]] = set()
        """(method, template) of a served route without a contract entry, or (method, path)
        of a request no route matched: each answered 404."""
        self.undocumented: set[tuple[str, str, int]] = set()
        """(method, template, code): an error a handler answered that its entry omits."""
        self.outage: Outage | None = None
        """Discord misbehaving until ``outage.until`` (``FakeDiscord.misbehave``)."""

    def current_outage(self) -> Outage | None:
        outage = self.outage
        if outage is not None and time.monotonic() >= outage.until:
            self.outage = outage = None
        return outage

    def fail(self, route: str, fault: Fault) -> None:
        key = route.strip()
        if fault.status == 429 and fault.scope == "global":
            method, pattern = route_pattern(key)
            exempt = [e.path for e in contract.CONTRACT
                      if e.method == method and pattern.match(e.path) and not e.global_limit]
            if exempt:
                raise ValueError(f"{exempt[0]} is not bound by the global rate limit "
                                 "(topics/rate-limits#global-rate-limit)")
        self._faults.setdefault(key, (*route_pattern(key), deque()))[2].append(fault)

    def pending_faults(self, route: str) -> int:
        entry = self._faults.get(route.strip())
        return 0 if entry is None else len(entry[2])

    def unfail(self, route: str) -> int:
        """Drop the faults still queued for ``route``; how many there were."""
        entry = self._faults.pop(route.strip(), None)
        return 0 if entry is None else len(entry[2])

    def calls(self, route: str | None = None) -> list[Call]:
        if route is None:
            return list(self.requests)
        method, pattern = route_pattern(route)
        return [c for c in self.requests if c.method == method and pattern.match(c.path)]

    async def answer(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        headers = {k.lower(): v for k, v in request.headers.items()}
        call = Call(request.method, path, None, dict(request.query), None, headers,
                    time.monotonic())
        self.requests.append(call)
        try:
            body, files = await _parse(request)
        except DiscordError as error:
            return self._reply(call, error.status, error.body())
        call.json = body
        found = self._route(request.method, path)
        endpoint = None if found is None else contract.entry(request.method, found[0])
        if found is None or endpoint is None:
            self.uncovered.add((request.method, path if found is None else found[0]))
            return self._reply(call, 404, {"message": "404: Not Found", "code": 0})
        template, params, handler = found
        call.route = template
        if endpoint.auth and headers.get("authorization") != f"Bot {self.rest.world.token}":
            return self._reply(call, 401, {"message": "401: Unauthorized", "code": 0})
        self.served.add((request.method, template))
        outage = self.current_outage()
        if outage is not None and outage.mode == "down":
            assert request.transport is not None
            request.transport.abort()  # Discord unreachable: no answer at all
            return self._reply(call, 503, {"message": "down", "code": 0})
        if outage is not None and outage.mode == "slow":
            await asyncio.sleep(outage.delay_s)
        fault = Fault(outage.status, outage.retry_after) if outage is not None and \
            outage.mode == "status" else None
        fault = fault or self._take_fault(request.method, path) \
            or self._over_limit(request.method, template, params)
        if fault is not None and fault.status is not None:
            return self._fault_reply(call, fault, template)
        refused = contract.check(endpoint, body, files, dict(request.query))
        if refused is not None:
            return self._reply(call, refused.status, refused.body(), template)
        gateway = "wss://gateway.discord.gg" if request.secure else self.gateway_url()
        try:
            status, answer = await handler(Request(request.method, params, dict(request.query),
                                                   body, files, gateway))
        except DiscordError as error:
            status, answer = error.status, error.body()
            if error.code not in contract.COMMON + endpoint.errors:
                self.undocumented.add((request.method, template, error.code))
        hook = self.after_call.get(f"{request.method} {template}")
        if hook is not None:
            hook(sum(c.route == template and c.method == request.method
                     for c in self.requests))
        if fault is not None and fault.drop:
            call.status, call.dropped = status, True
            assert request.transport is not None
            request.transport.abort()  # carried out; the client never hears back
        return self._reply(call, status, answer, template)

    def _route(self, method: str, path: str) -> tuple[str, dict[str, str], Handler] | None:
        for m, pattern, template, handler in self._routes:
            match = pattern.match(path)
            if m == method and match:
                return template, match.groupdict(), handler
        return None

    def _over_limit(self, method: str, template: str, params: dict[str, str]) -> Fault | None:
        """A 429 for a message send or edit past ``message_limit`` in its channel."""
        channel = params.get("channel_id")
        limited = (method, template) in (("POST", "/channels/{channel_id}/messages"), (
            "PATCH", "/channels/{channel_id}/messages/{message_id}"))
        if self.message_limit is None or channel is None or not limited:
            return None
        count, window = self.message_limit
        now = time.monotonic()
        sent = self._sent.setdefault(channel, deque())
        while sent and sent[0] <= now - window:
            sent.popleft()
        if len(sent) < count:
            sent.append(now)
            return None
        self.limited[channel] = self.limited.get(channel, 0) + 1
        return Fault(429, retry_after=round(sent[0] + window - now, 3) or 0.001)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for m, pattern, queue in self._faults.values():
            if m == method and pattern.match(path) and queue:
                return queue.popleft()
        return None

    def _reply(self, call: Call, status: int, body: Any, template: str | None = None,
               extra: dict[str, str] | None = None) -> web.Response:
        call.status = call.status or status
        if call.answer is None:
            call.answer = body
        headers = {"Via": "1.1 google", **_ratelimit_headers(call.method, template),
                   **(extra or {})}
        if body is None:
            return web.Response(status=status, headers=headers)
        # exactly "application/json": discord.py reads anything else as text
        return web.Response(status=status, body=json.dumps(body).encode(),
                            headers={**headers, "Content-Type": "application/json"})

    def _fault_reply(self, call: Call, fault: Fault, template: str) -> web.Response:
        assert fault.status is not None
        if fault.status != 429:
            return self._reply(call, fault.status,
                               {"message": f"{fault.status}: Server Error", "code": 0})
        wait = fault.retry_after
        extra = {"Retry-After": str(max(1, math.ceil(wait))), "X-RateLimit-Scope": fault.scope}
        bucket: str | None = template
        if fault.scope == "global":
            extra["X-RateLimit-Global"] = "true"
            bucket = None  # a global limit is no route's bucket
        else:
            extra.update({"X-RateLimit-Reset-After": f"{wait:.3f}",
                          "X-RateLimit-Reset": f"{time.time() + wait:.3f}",
                          # a shared (per-resource) limit leaves the bot's own bucket as is
                          "X-RateLimit-Remaining": "4" if fault.scope == "shared" else "0"})
        said = "The resource is being rate limited." if fault.scope == "shared" \
            else "You are being rate limited."
        return self._reply(call, 429, {"message": said, "retry_after": wait,
                                       "global": fault.scope == "global"}, bucket, extra)


def _ratelimit_headers(method: str, template: str | None) -> dict[str, str]:
    """A bucket that is never exhausted: the fake rate-limits only when told to (``fail``)."""
    if template is None:
        return {}
    return {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4",
            "X-RateLimit-Reset": f"{time.time() + 5:.3f}", "X-RateLimit-Reset-After": "5.000",
            "X-RateLimit-Bucket": md5(f"{method} {template}".encode()).hexdigest()}


async def _parse(request: web.Request) -> tuple[Any, list[JSON]]:
    """The JSON body (or a multipart's ``payload_json``) and any uploaded files."""
    try:
        return await _read(request)
    except web.HTTPRequestEntityTooLarge:
        raise DiscordError(413, 40005, "Request entity too large") from None


async def _read(request: web.Request) -> tuple[Any, list[JSON]]:
    if request.content_type == "multipart/form-data":
        body: Any = None
        files: list[JSON] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, aiohttp.BodyPartReader):
                continue
            if part.name == "payload_json":
                body = json.loads(await part.text())
            elif part.filename:
                data = bytes(await part.read())
                files.append({"id": str(p.new_id()), "filename": part.filename, "size": len(data),
                              "_data": data, "_field": part.name or "",
                              "content_type": part.headers.get("Content-Type",
                                                               "application/octet-stream")})
        return body, files
    raw = await request.read()
    if not raw:
        return None, []
    try:
        return json.loads(raw), []
    except ValueError:
        raise DiscordError(400, 50109, "The request body contains invalid JSON.") from None
