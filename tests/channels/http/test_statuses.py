"""Each route answers with a success status its OpenAPI schema declares (issue 55): every
operation of the schema the app serves is called as a client would, to succeed, over a
real socket, and the status it answers must be one of the 2xx the schema lists for it. The
schedules' pause and resume answered 204 while the schema said 200; a route that does the
like fails here, and so does a route added without a call below."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import httpx

from runtime import Origin, tool
from runtime.model.memories import WorkspaceScope
from schedules import ScheduleConfig
from schedules.hooks import Hook, HookConfig
from tests.channels.memory_seeds import plant, said
from tests.clock import Clock
from tests.http_helpers import STREAM, echo_runtime, scheduled, served, thread_url

MESSAGES = "POST /v1/threads/{thread_id}/messages"


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


class Answers:
    """The statuses each operation (``"POST /v1/schedules/{name}/pause"``) answered."""

    def __init__(self) -> None:
        self.seen: defaultdict[str, list[int]] = defaultdict(list)

    def __call__(self, operation: str, response: httpx.Response) -> httpx.Response:
        assert response.is_success, (operation, response.status_code, response.text)
        self.seen[operation].append(response.status_code)
        return response


async def _streamed(client: httpx.AsyncClient, method: str, url: str,
                    **kwargs: object) -> httpx.Response:
    """The response read to its end (an event stream ends when its run ends or pauses)."""
    async with client.stream(method, url, **kwargs) as response:  # type: ignore[arg-type]
        await response.aread()
    return response


def declared(spec: dict[str, object]) -> dict[str, set[int]]:
    """Each operation's documented success statuses."""
    paths = spec["paths"]
    assert isinstance(paths, dict)
    return {f"{method.upper()} {path}": {int(s) for s in op["responses"] if s.startswith("2")}
            for path, operations in paths.items() for method, op in operations.items()}


async def test_every_route_answers_with_a_status_its_schema_declares(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    clock = Clock(datetime(2026, 3, 2, 8, 55, tzinfo=UTC))
    notes = b"the numbers\n"
    hook = Hook(HookConfig(name="ci", secret_env="CI_SECRET", prompt="the build {state}"),
                b"s3cret", Origin(channel="schedule"))
    async with echo_runtime(db, [deploy]) as rt, \
            scheduled(rt, db, configs, clock, [hook]) as scheduler, \
            served(rt, token="t0k", schedules=scheduler) as (client, _):
        spec = (await client.get("/openapi.json")).json()
        answered = Answers()

        answered("GET /healthz", await client.get("/healthz"))
        answered("GET /metrics", await client.get("/metrics"))

        # A thread: a message answered (200), one accepted (202), one streamed (200).
        done = answered(MESSAGES, await client.post(thread_url("t", "/messages"), json={
            "text": "hello", "files": [{"name": "notes.txt",
                                        "data": base64.b64encode(notes).decode()}]}))
        accepted = answered(MESSAGES, await client.post(thread_url("t", "/messages"),
                                                        json={"text": "later", "wait": False}))
        assert accepted.status_code == 202 and done.status_code == 200
        answered(MESSAGES, await _streamed(client, "POST", thread_url("t", "/messages"),
                                           json={"text": "streamed"}, headers=STREAM))
        await rt.wait(accepted.json()["run_id"])
        answered("GET /v1/threads", await client.get("/v1/threads"))
        answered("GET /v1/threads/{thread_id}", await client.get(thread_url("t")))
        answered("GET /v1/threads/{thread_id}/export",
                 await _streamed(client, "GET", thread_url("t", "/export")))
        answered("GET /v1/files/{digest}",
                 await client.get(f"/v1/files/{hashlib.sha256(notes).hexdigest()}"))

        run_id = done.json()["run_id"]
        answered("GET /v1/runs", await client.get("/v1/runs"))
        answered("GET /v1/runs/{run_id}", await client.get(f"/v1/runs/{run_id}"))
        answered("GET /v1/runs/{run_id}/events",
                 await _streamed(client, "GET", f"/v1/runs/{run_id}/events"))

        # A call approved; another's run cancelled while it waits, then resumed.
        for service, decide in (("api", True), ("db", False)):
            paused = (await client.post(thread_url("ops", "/messages"), json={
                "text": f'/tool deploy {{"service": "{service}"}}'})).json()
            assert paused["state"] == "awaiting_approval", paused
            waiting = paused["run_id"]
            if decide:
                call = paused["approval"]["tool_call_id"]
                answered("POST /v1/runs/{run_id}/approvals/{tool_call_id}", await client.post(
                    f"/v1/runs/{waiting}/approvals/{call}",
                    json={"approve": True, "wait": True}))
            else:
                answered("POST /v1/runs/{run_id}/cancel",
                         await client.post(f"/v1/runs/{waiting}/cancel", json={}))
                answered("POST /v1/runs/{run_id}/resume", await client.post(
                    f"/v1/runs/{waiting}/resume", params={"wait": True}))

        answered("GET /v1/schedules", await client.get("/v1/schedules"))
        answered("POST /v1/schedules/{name}/run",
                 await client.post("/v1/schedules/hourly/run", params={"wait": True}))
        answered("GET /v1/schedules/{name}/history",
                 await client.get("/v1/schedules/hourly/history"))
        answered("POST /v1/schedules/{name}/pause",
                 await client.post("/v1/schedules/hourly/pause"))
        answered("POST /v1/schedules/{name}/resume",
                 await client.post("/v1/schedules/hourly/resume"))

        answered("GET /v1/feedback", await client.get("/v1/feedback"))

        # A webhook's delivery (202), and the same delivery again (200).
        body = b'{"state": "failed"}'
        signed = {"X-Hub-Signature-256": "sha256=" + hmac.new(
            b"s3cret", body, hashlib.sha256).hexdigest(), "X-GitHub-Delivery": "d1"}
        for _ in range(2):
            answered("POST /v1/hooks/{name}",
                     await client.post("/v1/hooks/ci", content=body, headers=signed))

        # The OpenAI wire, answered whole and streamed.
        answered("GET /v1/models", await client.get("/v1/models"))
        answered("GET /v1/models/{model}", await client.get("/v1/models/maiden"))
        chat = {"model": "maiden", "messages": [{"role": "user", "content": "hi"}]}
        answered("POST /v1/chat/completions",
                 await client.post("/v1/chat/completions", json=chat))
        answered("POST /v1/chat/completions", await _streamed(
            client, "POST", "/v1/chat/completions", json={**chat, "stream": True}))
        response = answered("POST /v1/responses", await client.post(
            "/v1/responses", json={"model": "maiden", "input": "hello"}))
        answered("POST /v1/responses", await _streamed(
            client, "POST", "/v1/responses",
            json={"model": "maiden", "input": "again", "stream": True}))
        answered("GET /v1/responses/{response_id}",
                 await client.get(f"/v1/responses/{response.json()['id']}"))

        # A memory listed, read, edited and forgotten (the token may operate: it sees all).
        kept = await plant(rt, "the build runs nightly", WorkspaceScope(),
                           said("http", "ops", None, "t"))
        answered("GET /v1/memories", await client.get("/v1/memories", params={"q": "build"}))
        answered("GET /v1/memories/{memory_id}", await client.get(f"/v1/memories/{kept.id}"))
        answered("PATCH /v1/memories/{memory_id}", await client.patch(
            f"/v1/memories/{kept.id}", json={"text": "the build runs at 2am"}))
        answered("DELETE /v1/memories/{memory_id}",
                 await client.delete(f"/v1/memories/{kept.id}"))
        await plant(rt, "ops is on call", WorkspaceScope(), said("http", "ops", None, "t"))
        gone = answered("DELETE /v1/memories", await client.delete(
            "/v1/memories", params={"person": "http:ops"}))
        assert gone.json() == {"person": "http:ops", "memories": 1}

        answered("DELETE /v1/threads/{thread_id}", await client.delete(thread_url("t")))

    documented = declared(spec)
    assert sorted(set(documented) - set(answered.seen)) == [], \
        "routes not called here: add a call that succeeds"
    assert sorted(set(answered.seen) - set(documented)) == [], "called, but not in the schema"
    wrong = {op: (sorted(set(got)), sorted(documented[op]))
             for op, got in answered.seen.items() if not set(got) <= documented[op]}
    assert not wrong, f"answered (first) where the schema declares (second): {wrong}"
