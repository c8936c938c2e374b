"""``FakeSlack``: a real aiohttp server on 127.0.0.1 that slack-sdk and slack-bolt talk to.

It serves the Web API at ``/api/<method>`` the way Slack does: GET query strings, form-encoded
or JSON POST bodies; a ``Bearer`` token (or ``token`` in a form body, never in a JSON body);
every answer HTTP 200 with ``{"ok": ...}`` unless a fault says otherwise; ``x-oauth-scopes`` on
bot-token answers. ``apps.connections.open`` hands out a URL of the fake's own Socket Mode
endpoint (``socket.py``). After the token and the scopes, every call is held to Slack's
documented contract (``contract.py``, ``rules.py``) before its handler runs; a method the fake
serves without a contract entry answers ``unknown_method`` and is named in ``uncovered``.

Faults are queued per method and consumed in order: a status (429 with ``Retry-After``, which
slack-sdk's ``AsyncRateLimitErrorRetryHandler`` honours; 500/503, which its
``AsyncServerErrorRetryHandler`` retries), an ``error`` answered as ``ok: false``, or ``drop``:
the call is carried out and the connection closed before any byte of the answer — the "posted,
but the answer was lost" case. slack-sdk's default ``AsyncConnectionErrorRetryHandler`` retries
that once, so a dropped ``chat.postMessage`` is posted twice unless the client opts out.

``misbehave`` is a switch for a while rather than a queue: every call answered with a status
(429 ``ratelimited`` with ``Retry-After``, as https://docs.slack.dev/apis/web-api/rate-limits
says; 5xx), each answered ``delay_s`` late (slow), or Slack down (every connection to the Web
API closed unanswered, Socket Mode's links closed and new ones refused).
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Self

from aiohttp import web

from ..site import loopback_runner, serve_on_loopback
from . import payloads
from .contract import CONTRACT
from .conversations import Conversations
from .files import SharedFiles, Uploads
from .methods import WebAPI, Workspace, needed_scopes
from .people import People
from .request_url import RequestUrl
from .rules import enforce
from .socket import SocketMode
from .store import JSON, SlackError, Store, render
from .wire import Call, Fault, Outage, parse

_APP_METHODS = frozenset({"apps.connections.open"})
_STATUS_ERRORS = {429: "ratelimited", 500: "fatal_error", 502: "bad_gateway",
                  503: "service_unavailable", 504: "request_timeout"}


class FakeSlack:
    """Slack on loopback.

    ``async with FakeSlack() as fake:
    AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)``
    """

    def __init__(self, workspace: Workspace | None = None, *, assistant: bool = True,
                 agent: bool | None = None, wait: float = 5.0, port: int = 0) -> None:
        self.workspace = workspace or Workspace()
        self.wait = wait
        """Default deadline (seconds) of every wait: connections, acks, messages, ``until``."""
        self.assistant = assistant
        """False: ``assistant.threads.setStatus`` answers ``unknown_method``."""
        self.agent = assistant if agent is None else agent
        """False: the app is not an agent, or the workspace lacks the feature:
        ``agents.sessions.*`` answer ``feature_disabled`` (as without ``assistant``)."""
        self.store = Store()
        self.api = WebAPI(self.workspace, self.store)
        self.shared = SharedFiles(self.workspace.team_id, self.workspace.bot_token)
        """Files people shared, and their downloads."""
        self.uploads = Uploads(self.shared, self.workspace.bot_user_id, lambda: self.base_url,
                               lambda channel, fields, thread_ts: self.store.post(
                                   channel, {**self.api.bot_fields(), **fields},
                                   thread_ts=thread_ts))
        """The bot's uploads (``files_upload_v2``)."""
        self.people = People(self.workspace)
        """Who ``users.info`` knows (``person``)."""
        self.conversations = Conversations(self.workspace, self.store)
        """What ``conversations.info`` says of each channel (``conversation``)."""
        self.api.extra = {"files.getUploadURLExternal": self.uploads.get_url,
                          "files.completeUploadExternal": self.uploads.complete,
                          "files.info": self.uploads.info,
                          "users.info": self.people.info,
                          "conversations.info": self.conversations.info}
        self._changed = asyncio.Condition()
        self.socket = SocketMode(self.workspace.app_id, self._changed)
        self.requests: list[Call] = []
        self.uncovered: set[str] = set()
        """Methods called that the fake serves but its contract (``contract.py``) has no
        entry for: each answered ``unknown_method``."""
        self.after_call: dict[str, Callable[[int], None]] = {}
        """method -> called with how many calls of it there have been, each time one has
        been carried out, before it is answered (e.g. to kill a process mid-stream)."""
        self._faults: dict[str, deque[Fault]] = defaultdict(deque)
        self.outage: Outage | None = None
        """``misbehave``'s switch, while it lasts."""
        self.request_url = RequestUrl(self.workspace.signing_secret, outage=self._outage,
                                      wait_s=wait)
        """Slack's side of HTTP mode: events, clicks and commands POSTed to an app."""
        self._runner: web.AppRunner | None = None
        self.port = port
        """Where it serves (0: a free port, chosen at start)."""

    # -- addresses and identity

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """The ``base_url`` for ``AsyncWebClient``."""
        return f"{self.base_url}/api/"

    @property
    def bot_token(self) -> str:
        return self.workspace.bot_token

    @property
    def app_token(self) -> str:
        return self.workspace.app_token

    @property
    def signing_secret(self) -> str:
        return self.workspace.signing_secret

    # -- lifecycle

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_get("/link/", self._link)
        app.router.add_get("/files-pri/{file}/download/{name}", self.shared.serve)
        app.router.add_post("/upload/v1/{id}", self.uploads.receive)
        self._runner = loopback_runner(app)
        await self._runner.setup()
        self.port = await serve_on_loopback(self._runner, port=self.port)
        await self.request_url.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self.request_url.__aexit__()
        await self.socket.shutdown()
        await self._runner.cleanup()

    # -- test controls and records

    def fail(self, method: str, *, status: int | None = None, retry_after: int | None = None,
             drop: bool = False, error: str | None = None) -> None:
        """Queue a fault for ``method``: each call takes the next queued fault, if any."""
        if (status is None) + (not drop) + (error is None) != 2:
            raise ValueError("a fault is one of status=, drop=True or error=")
        self._faults[method].append(Fault(status, retry_after, drop, error))

    def pending_faults(self, method: str) -> int:
        return len(self._faults[method])

    async def misbehave(self, mode: str, seconds: float, *, status: int = 503,
                        retry_after: int = 1, delay_s: float = 2.0) -> None:
        """For ``seconds``: every Web API call answered ``status`` (``mode="status"``; 429
        with ``Retry-After: retry_after``), or ``delay_s`` late (``"slow"``), or Slack down
        (``"down"``: calls cut unanswered, Socket Mode links closed and refused)."""
        self.outage = Outage(mode, time.monotonic() + seconds, status, retry_after, delay_s)
        if mode == "down":
            await self.socket.shutdown()

    def _outage(self) -> Outage | None:
        outage = self.outage
        if outage is not None and time.monotonic() >= outage.until:
            self.outage = outage = None
        return outage

    async def _link(self, request: web.Request) -> web.StreamResponse:
        outage = self._outage()
        if outage is not None and outage.mode == "down":
            return web.Response(status=503, text="slack is down")
        return await self.socket.handle(request)

    def calls(self, method: str) -> list[JSON]:
        """The parameters of every call of ``method``, in order (JSON-typed fields decoded)."""
        return [c.params for c in self.requests if c.method == method]

    def messages(self, channel: str) -> list[JSON]:
        """Everything stored in ``channel``, roots and replies, oldest first, with metadata."""
        return [render(m, metadata=True) for m in self.store.all(channel)]

    def ephemerals(self, channel: str) -> list[JSON]:
        return copy.deepcopy(self.store.ephemerals.get(channel, []))

    def served(self) -> set[str]:
        """Every Web API method the fake answers."""
        return {*self.api.table(), "auth.test", *_APP_METHODS}

    def sessions(self) -> dict[tuple[str, str], JSON]:
        """Each agent session by (channel, thread_ts): its status and title, each with its
        history, and who started it."""
        return {where: session.view() for where, session in self.api.sessions.by_thread.items()}

    def session_stopped(self, channel: str, thread_ts: str, user: str) -> JSON:
        """A person clicks stop on the agent session in the thread: the app's streams there
        stop, and this is the ``agent_session_stopped`` event_callback Slack delivers."""
        stopped = self.api.sessions.stop(channel, thread_ts)
        return self.event_callback(payloads.agent_session_stopped_event(
            channel, thread_ts, user, stopped, self.store.next_ts()))

    def stop_button(self, channel: str, thread_ts: str, user: str) -> JSON | None:
        """A person clicks the stop button in the thread, if Slack shows one: only "while an
        agent session is in the processing status" (docs.slack.dev/reference/events/
        agent_session_stopped); the ``session_stopped`` event, or None (no button shown)."""
        session = self.api.sessions.by_thread.get((channel, thread_ts))
        if session is None or session.status != "processing":
            return None
        return self.session_stopped(channel, thread_ts, user)

    def statuses(self) -> list[JSON]:
        """Every ``assistant.threads.setStatus`` carried out."""
        return copy.deepcopy(self.api.statuses)

    def person(self, user: str, *, tz: str, tz_label: str | None = None,
               tz_offset: int | None = None, name: str | None = None) -> JSON:
        """Set up a person ``users.info`` answers for, in time zone ``tz`` (an IANA name;
        the label and offset default to that zone's now)."""
        return self.people.add(user, tz=tz, tz_label=tz_label, tz_offset=tz_offset, name=name)

    def conversation(self, channel: str, kind: payloads.ChannelType) -> None:
        """``conversations.info`` says ``channel`` is (now) of ``kind`` (``group``: a private
        channel, whatever its id)."""
        self.conversations.set(channel, kind)

    def post_as_user(self, channel: str, user: str, text: str, *,
                     thread_ts: str | None = None) -> JSON:
        """Store a message a person wrote (as if typed in Slack) and return it."""
        message = self.store.post(channel, {"user": user, "text": text,
                                            "team": self.workspace.team_id},
                                  thread_ts=thread_ts)
        return render(message, metadata=True)

    def user_event(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
                   channel_type: payloads.ChannelType = "channel", mention: bool = False
                   ) -> JSON:
        """``post_as_user``, and the ``event_callback`` Slack would deliver for it."""
        message = self.post_as_user(channel, user, text, thread_ts=thread_ts)
        team = self.workspace.team_id
        if mention:
            event = payloads.app_mention_event(team, channel, user, text, message["ts"],
                                               thread_ts=message.get("thread_ts"))
        else:
            event = payloads.message_event(team, channel, user, text, message["ts"],
                                           thread_ts=message.get("thread_ts"),
                                           channel_type=channel_type,
                                           parent_user_id=message.get("parent_user_id"))
        return self.event_callback(event)

    def share_file(self, channel: str, user: str, text: str,
                   files: list[tuple[str, bytes, str]], *, thread_ts: str | None = None,
                   channel_type: payloads.ChannelType = "channel") -> JSON:
        """A person's message with files (``(name, bytes, mimetype)``), stored and served
        at their ``url_private_download``; the ``file_share`` event Slack delivers."""
        objects = [self.shared.add(self.base_url, user, name, data, mimetype)
                   for name, data, mimetype in files]
        message = self.store.post(channel, {"user": user, "text": text, "files": objects,
                                            "team": self.workspace.team_id},
                                  thread_ts=thread_ts)
        event = payloads.message_event(self.workspace.team_id, channel, user, text,
                                       message["ts"], thread_ts=message.get("thread_ts"),
                                       channel_type=channel_type, subtype="file_share")
        event |= {"files": objects, "upload": False, "display_as_bot": False}
        return self.event_callback(event)

    def event_callback(self, event: JSON) -> JSON:
        ws = self.workspace
        return payloads.event_callback(event, team_id=ws.team_id, api_app_id=ws.app_id,
                                       bot_user_id=ws.bot_user_id)

    # -- Socket Mode (each wait has a deadline: ``timeout`` or the fake's ``wait``)

    @asynccontextmanager
    async def _deadline(self, seconds: float | None, what: str) -> AsyncIterator[None]:
        """``asyncio.timeout`` (the fake's ``wait`` by default) whose error names ``what``."""
        seconds = self.wait if seconds is None else seconds
        try:
            async with asyncio.timeout(seconds):
                yield
        except TimeoutError:
            raise TimeoutError(f"FakeSlack waited {seconds}s for {what}") from None

    async def _send(self, envelope: JSON, to: int | None = None) -> str:
        async with self._deadline(None, "a live Socket Mode connection"):
            return await self.socket.send_envelope(envelope, to=to)

    async def socket_event(self, payload: JSON, *, retry_attempt: int = 0,
                           retry_reason: str = "", to: int | None = None) -> str:
        """Send an ``events_api`` envelope; ``payload`` is an event_callback or a bare event.
        ``to``: the ``to``-th live connection, oldest first (default: the newest)."""
        if payload.get("type") != "event_callback":
            payload = self.event_callback(payload)
        return await self._send(payloads.events_api_envelope(
            payload, str(uuid.uuid4()), retry_attempt=retry_attempt, retry_reason=retry_reason),
            to)

    async def socket_redeliver(self, envelope_id: str, *, reason: str = "timeout",
                               to: int | None = None) -> str:
        """Slack's retry of an events_api envelope: same payload, next ``retry_attempt``
        (``to``: on another connection, as Slack may)."""
        first = self.socket.sent[envelope_id]
        attempt = int(first.get("retry_attempt", 0)) + 1
        if first["type"] != "events_api" or attempt > 3:
            raise ValueError("Slack retries events_api envelopes at most 3 times")
        return await self.socket_event(first["payload"], retry_attempt=attempt,
                                       retry_reason=reason, to=to)

    async def socket_command(self, payload: JSON) -> str:
        """Send a ``slash_commands`` envelope (``payloads.slash_command(...)``); the same
        payload again (its ``trigger_id``) is Slack delivering the command again."""
        return await self._send(payloads.slash_commands_envelope(payload, str(uuid.uuid4())),
                                None)

    async def socket_interactive(self, payload: JSON) -> str:
        """Send an ``interactive`` envelope (e.g. ``block_actions_payload(...)``)."""
        return await self._send(payloads.interactive_envelope(payload, str(uuid.uuid4())))

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the connected client to reconnect (it calls ``apps.connections.open`` again)."""
        async with self._deadline(None, "a live Socket Mode connection"):
            await self.socket.disconnect(reason)

    async def socket_close(self) -> None:
        """Close the current connection from Slack's side without a ``disconnect`` first."""
        async with self._deadline(None, "a live Socket Mode connection"):
            await self.socket.close()

    # Waits take ``timeout=`` so a test reads "waits up to N seconds for this"; the default is
    # the fake's ``wait``, so a wait that never ends fails in seconds with what it waited for.

    async def until(self, predicate: Callable[[], bool], *, what: str = "a condition",
                    timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until ``predicate()`` holds; it is checked after every request and frame."""
        async with self._deadline(timeout, what):
            await self.socket.until(predicate)

    async def acked(self, envelope_id: str, *, timeout: float | None = None  # noqa: ASYNC109
                    ) -> JSON:
        """Wait for the client's ack of ``envelope_id`` and return it."""
        await self.until(lambda: envelope_id in self.socket.acks,
                         what=f"an ack of envelope {envelope_id}", timeout=timeout)
        return self.socket.acks[envelope_id]

    async def wait_connected(self, count: int = 1, *,
                             timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until ``count`` connections have been accepted in all, one of them live."""
        await self.until(lambda: self.socket.opened >= count and self.socket.live > 0,
                         what=f"Socket Mode connection #{count}", timeout=timeout)

    async def wait_messages(self, channel: str, count: int, *,
                            timeout: float | None = None) -> list[JSON]:  # noqa: ASYNC109
        """Wait until ``channel`` holds ``count`` messages; return them (``messages()``)."""
        await self.until(lambda: len(self.store.all(channel)) >= count,
                         what=f"{count} messages in {channel}", timeout=timeout)
        return self.messages(channel)

    # -- the Web API

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._answer(request)
        finally:
            async with self._changed:  # wake ``until`` waiters: a call was recorded
                self._changed.notify_all()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            params, token, warnings = await parse(request)
        except SlackError as error:
            return web.json_response(error.body())
        self.requests.append(Call(method, request.method, params,
                                  {k.lower(): v for k, v in request.headers.items()},
                                  time.monotonic()))
        async with self._changed:  # a call received is seen while it is held (``slow``)
            self._changed.notify_all()
        outage = self._outage()
        if outage is not None and outage.mode == "down":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=503)
        if outage is not None and outage.mode == "slow":
            await asyncio.sleep(outage.delay_s)
        fault = self._faults[method].popleft() if self._faults[method] else None
        if outage is not None and outage.mode == "status":
            fault = Fault(outage.status, outage.retry_after if outage.status == 429 else None)
        if fault is not None and fault.status is not None:
            retry = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            return web.json_response(
                {"ok": False, "error": _STATUS_ERRORS.get(fault.status, "fatal_error")},
                status=fault.status, headers=retry)
        if fault is not None and fault.error is not None:
            return web.json_response({"ok": False, "error": fault.error})
        body, headers = self._dispatch(method, params, token)
        hook = self.after_call.get(method)
        if hook is not None:
            hook(len(self.calls(method)))
        if warnings and body["ok"]:
            body["warning"] = ",".join(warnings)
            metadata: JSON = body.setdefault("response_metadata", {})
            metadata["warnings"] = warnings
        if fault is not None and fault.drop:
            assert request.transport is not None
            request.transport.abort()  # carried out; the client never hears back
        return web.json_response(body, headers=headers)

    def _dispatch(self, method: str, params: JSON, token: str | None
                  ) -> tuple[JSON, dict[str, str]]:
        headers: dict[str, str] = {}
        try:
            handler = self.api.table().get(method)
            known = handler is not None or method in ("auth.test", *_APP_METHODS)
            if not known or (method == "assistant.threads.setStatus" and not self.assistant):
                raise SlackError("unknown_method", req_method=method)
            if method not in CONTRACT:
                self.uncovered.add(method)
                raise SlackError("unknown_method", req_method=method)
            kind = self._token_kind(token)
            if kind == "bot":
                headers["x-oauth-scopes"] = ",".join(self.workspace.scopes)
            if (method in _APP_METHODS) != (kind == "app"):
                raise SlackError("not_allowed_token_type")
            needed = needed_scopes(method, params)
            if needed:
                headers["x-accepted-oauth-scopes"] = ",".join(needed)
                if not set(needed) & set(self.workspace.scopes):
                    raise SlackError("missing_scope", needed=needed[0],
                                     provided=",".join(self.workspace.scopes))
            if method.startswith("agents.sessions.") and not self.agent:
                raise SlackError("feature_disabled")
            enforce(method, params)
            if method == "auth.test":
                result = self._auth_test()
            elif method == "apps.connections.open":
                ticket = self.socket.issue_ticket()
                result = {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}"
                                 f"&app_id={self.workspace.app_id}"}
            else:
                assert handler is not None
                result = handler(params)
        except SlackError as error:
            return error.body(), headers
        return {"ok": True, **result}, headers

    def _token_kind(self, token: str | None) -> str:
        if not token:
            raise SlackError("not_authed")
        if token == self.workspace.bot_token:
            return "bot"
        if token == self.workspace.app_token:
            return "app"
        raise SlackError("invalid_auth")

    def _auth_test(self) -> JSON:
        ws = self.workspace
        return {"url": f"https://{ws.domain}.slack.com/", "team": ws.team, "user": ws.bot_name,
                "team_id": ws.team_id, "user_id": ws.bot_user_id, "bot_id": ws.bot_id,
                "is_enterprise_install": False}
