"""The HTTP API as a channel of `maiden run`: FastAPI and uvicorn load when it starts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from runtime import Deliverer, FileFetcher, Indexer, Runtime, ScheduleService

from .auth import Credentials
from .config import LEGACY_NAME, HttpConfig, OpenAIApiConfig

if TYPE_CHECKING:
    from .app import HttpApi
    from .console import RulesSource, StatusSource
    from .server import HttpServer

__all__ = ["Endpoint", "HttpChannel"]

Endpoint = Callable[[Any], Awaitable[Any]]
"""An ASGI-framework endpoint: a Starlette request in, a response out."""


class HttpChannel:
    """Serves the API in the runtime's process; it answers callers directly (no deliverer)."""

    name = "http"
    deliverer: Deliverer | None = None
    fetcher: FileFetcher | None = None

    def __init__(
        self, runtime: Runtime, config: HttpConfig, credentials: Credentials | str | None,
        *, routes: Sequence[tuple[str, Callable[[], Endpoint]]] = (),
        statuses: StatusSource | None = None, rules: RulesSource | None = None,
        schedules: ScheduleService | None = None, openai: OpenAIApiConfig | None = None,
        knowledge: Indexer | None = None,
    ) -> None:
        self.runtime = runtime
        self.openai = openai
        """``[openai_api]`` (None: the defaults)."""
        self.schedules = schedules
        """The schedules this process fires, for the API and the console (None: none)."""
        self.knowledge = knowledge
        """The ``[[knowledge]]`` folders' indexer, whose passes the console shows."""
        self.config = config
        self.credentials = credentials if isinstance(credentials, Credentials) \
            else Credentials.single(credentials)
        """The named tokens callers authenticate with (a str or None: one token, or none)."""
        self.statuses = statuses
        """Every channel's status, for the console's Now page."""
        self.rules = rules
        """Who may do what on each chat channel, for the console's Now page."""
        self.routes = routes
        """Other channels' endpoints served here (Slack's Events API): a path and a way to
        get the endpoint once that channel has started. They carry their own auth."""
        self._api: HttpApi | None = None
        self._server: HttpServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return self._server.url

    async def __aenter__(self) -> Self:
        from .app import create_app
        from .server import HttpServer

        app = create_app(self.runtime, self.config, credentials=self.credentials,
                         statuses=self.statuses or (lambda: [(self.name, self.status())]),
                         rules=self.rules, schedules=self.schedules, openai=self.openai,
                         knowledge=self.knowledge)
        for path, endpoint in self.routes:
            app.add_route(path, endpoint(), methods=["POST"], include_in_schema=False)
        self._api = app.state.maiden
        self._server = HttpServer(app, self.config.host, self.config.port,
                                  header_timeout_s=self.config.header_timeout_s,
                                  max_connections=self.config.max_connections)
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._api is not None:
            self._api.stop_intake()
            self._api.release()
        if self._server is not None:
            await self._server.stop()

    def banner(self) -> str:
        console = f"; console {self.url}/" if self.config.console else ""
        said = [f"bearer token from ${self.config.token_env}"
                if c.name == LEGACY_NAME and self.config.token_env else c.name
                for c in self.credentials]
        if said:
            return f"{self.url}  ({', '.join(said)}{console})"
        unset = f"${self.config.token_env} not set, " if self.config.token_env else ""
        return f"{self.url}  (no token: {unset}loopback only{console})"

    def status(self) -> str:
        if self._server is None:
            return "not started"
        if self._api is not None and self._api.closing:
            return "stopping"
        return f"serving {self.url}"

    def stop_intake(self) -> None:
        if self._api is not None:
            self._api.stop_intake()

    async def closed(self) -> None:
        assert self._server is not None, "not started"
        await asyncio.shield(self._server.task)  # a waiter that gives up must not stop it
