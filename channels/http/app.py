"""The HTTP API (DESIGN §9): ``create_app(runtime, config)`` returns the FastAPI app.

Every route calls the runtime's public API, as any channel does. A message is
persisted as a queued run before the request is answered; the answer comes once
the run ends or pauses (or at once with 202, for ``"wait": false``), or as a
stream of the run's events (``Accept: text/event-stream``). Errors are
``application/problem+json``. The routes live in ``routes/``, one router per
resource; this module composes them with the middleware and the console.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from runtime import Indexer, Runtime, ScheduleService

from . import routes
from .api import HttpApi
from .auth import Credentials
from .config import HttpConfig, OpenAIApiConfig
from .console import ConsoleOptions, RulesSource, StatusSource, mount_console
from .errors import fix_openapi, install_error_handlers
from .guard import HostGuard
from .hosts import Hosts
from .limits import BodyLimit
from .multipart import MultipartMessages
from .openai import router as openai_routes

__all__ = ["HttpApi", "create_app"]


def create_app(
    runtime: Runtime, config: HttpConfig | None = None, *, token: str | None = None,
    credentials: Credentials | None = None, statuses: StatusSource | None = None,
    rules: RulesSource | None = None, schedules: ScheduleService | None = None,
    openai: OpenAIApiConfig | None = None, knowledge: Indexer | None = None,
) -> FastAPI:
    """The HTTP API over ``runtime``, and the operator console at ``/`` (``[http]
    console``); ``app.state.maiden`` is its ``HttpApi``.

    ``credentials``: the named tokens every /v1 route and /metrics require, each with its
    rights (none: every caller is ``local``, which the app only allows on loopback);
    ``token``: one token with every right, named ``operator``. The console signs in with
    a token once per browser session. ``statuses``: each channel's state, for the console
    (and ``rules``: who may do what on each chat channel). ``schedules``: the schedules
    this process fires, listed and run by hand (None: it fires none). ``openai``:
    ``[openai_api]``, the OpenAI-compatible routes (on unless disabled). ``knowledge``: the
    ``[[knowledge]]`` folders' indexer, whose sources the console's Knowledge page shows.
    """
    config = config or HttpConfig()
    credentials = credentials if credentials is not None else Credentials.single(token)
    api = HttpApi(runtime, config, credentials, statuses, schedules, openai)
    # No /docs or /redoc: their pages load assets from a CDN, blank on an offline machine.
    # The schema is at /openapi.json for any viewer.
    app = FastAPI(title="maiden", version="1", lifespan=_lifespan, docs_url=None,
                  redoc_url=None,
                  description="Talk to the agent, follow its runs, decide approvals.")
    app.state.maiden = api
    app.add_middleware(MultipartMessages, max_files=runtime.kept.files.config.max_per_message)
    # A multipart message may carry its files whole: up to [files]' limits beside the body's.
    files = runtime.kept.files.config
    app.add_middleware(BodyLimit, limit=config.max_body_bytes, multipart_limit=(
        config.max_body_bytes + files.max_bytes * files.max_per_message))
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=config.cors_origins,
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key",
                                          "Accept"])
    # Outermost: a request that does not name this server reaches nothing else (the
    # console and routes added later, such as Slack's events, included).
    app.add_middleware(HostGuard, hosts=Hosts.of(config.host, config.allowed_hosts,
                                                 config.cors_origins))
    install_error_handlers(app)
    app.include_router(routes.message_router(runtime.operator.agents.default.config.max_message_chars))
    for router in (routes.threads, routes.erasure, routes.runs, routes.approvals,
                   routes.schedules, routes.hooks, routes.feedback, routes.files, routes.memories,
                   routes.service):
        app.include_router(router)
    if api.openai.enabled:
        app.include_router(openai_routes)
    _cache_openapi(app, tokens=credentials.required)
    if config.console:
        api.console = mount_console(app, runtime, credentials, ConsoleOptions(
            approvals=config.console_approvals,
            statuses=api.statuses, rules=rules, schedules=schedules, knowledge=knowledge))
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    api: HttpApi = app.state.maiden
    watcher = asyncio.create_task(api.metrics.watch(), name="maiden-http-metrics")
    try:
        yield
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


def _cache_openapi(app: FastAPI, *, tokens: bool) -> None:
    """The schema, built once. Without tokens no route asks for one: the bearer scheme and
    the 401 answers the routers declare are left out."""
    original = app.openapi
    cache: dict[str, dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        if "schema" not in cache:
            schema = fix_openapi(original())
            if not tokens:
                _without_auth(schema)
            cache["schema"] = schema
        return cache["schema"]

    app.openapi = openapi  # type: ignore[method-assign]


def _without_auth(schema: dict[str, Any]) -> None:
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            operation.pop("security", None)
            operation.get("responses", {}).pop("401", None)
    schema.get("components", {}).pop("securitySchemes", None)
