"""The OpenAPI schema is the truth: schemathesis fuzzes every operation (bounded), and no
request gets a 500 or an answer the schema does not describe."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from channels.http import HttpConfig
from channels.http.app import create_app
from channels.http.server import HttpServer
from runtime import AgentConfig, EchoProvider, Runtime, SQLiteStore, tool
from tests.http_helpers import echo_runtime, thread_url

TOKEN = "fuzz-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SETTINGS = HttpConfig(max_body_bytes=4096)
AGENT = AgentConfig(max_message_chars=500)


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class Background:
    """The API served from its own thread and event loop: schemathesis calls synchronously."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.url = ""
        self.ready = threading.Event()
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="api-under-fuzz", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def __enter__(self) -> Background:
        self._thread.start()
        assert self.ready.wait(20), "the API did not start"
        if self.failed is not None:
            raise self.failed
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.failed = exc
            self.ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        # Durability is not under test here: skip the fsyncs.
        async with echo_runtime(self.db, [deploy], synchronous="off",
                                max_message_chars=500) as runtime:
            app = create_app(runtime, SETTINGS, token=TOKEN)
            server = HttpServer(app, "127.0.0.1", 0, grace_s=1)
            await server.start()
            try:
                async with httpx.AsyncClient(base_url=server.url, headers=AUTH) as client:
                    await _seed(client)
                self.url = server.url
                self.ready.set()
                await self._stop.wait()
            finally:
                app.state.maiden.release()
                await server.stop()


async def _seed(client: httpx.AsyncClient) -> None:
    """Runs in every state the fuzzer's list requests should see described."""
    for text in ("hello", '/tool clock {"tz": "UTC"}', '/tool deploy {"service": "api"}'):
        response = await client.post(thread_url("seed", "/messages"), json={"text": text})
        assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Background]:
    with Background(tmp_path_factory.mktemp("fuzz") / "m.db") as background:
        yield background


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as shared:  # one connection, not one per example
        yield shared


def _schema() -> dict[str, Any]:
    """The schema an app with these settings serves (checked against the live one below)."""
    store = SQLiteStore(Path("unused.db"))  # never opened: the app only needs a runtime
    return create_app(Runtime(store, EchoProvider(), agent=AGENT), SETTINGS,
                      token=TOKEN).openapi()


SCHEMA = _schema()
schema = schemathesis.openapi.from_dict(SCHEMA)
# Every call carries the token (AUTH): a case made "invalid" by leaving it out would be sent
# with it. Unknown query parameters are ignored, as FastAPI does, not refused.
schema.config.generation.update(with_security_parameters=False, allow_extra_parameters=False)
# A malformed body may also be a large one: refused for its size (413) before it is read.
_refusals = schema.config.checks.negative_data_rejection
_refusals.expected_statuses = [*_refusals.expected_statuses, "413"]


def test_the_fuzzed_schema_is_the_served_one(api: Background) -> None:
    assert httpx.get(f"{api.url}/openapi.json").json() == SCHEMA


@schema.parametrize()
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_operation_matches_the_schema(
    case: Any, api: Background, session: requests.Session
) -> None:
    # What the schema cannot say is refused with a documented 4xx: a lone surrogate in a
    # string, a body over [http] max_body_bytes. A request the schema calls valid may be
    # refused so; never with a 500 or an answer the schema does not describe.
    case.call_and_validate(base_url=api.url, session=session, headers=AUTH, timeout=10,
                           excluded_checks=[positive_data_acceptance])
