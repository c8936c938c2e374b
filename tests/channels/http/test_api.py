"""The HTTP API, driven over a real socket: uvicorn serving the app on a free port."""

from __future__ import annotations

import asyncio
from importlib import metadata
from pathlib import Path
from typing import Any

from runtime import RunState, ToolCallStarted, tool
from tests.fakes.tools import until_cut_off
from tests.http_helpers import STREAM, echo_runtime, served, sse, thread_url, tokens

S = RunState
PROBLEM = "application/problem+json"


async def test_a_conversation(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        first = await client.post(thread_url("t1", "/messages"), json={"text": "hello"})
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["thread_id"] == "t1" and body["state"] == "completed"
        assert body["reply"] == "echo: hello" and body["usage"]["output_tokens"] > 0
        assert first.headers["location"] == f"/v1/runs/{body['run_id']}"
        second = await client.post(thread_url("t1", "/messages"),
                                   json={"text": '/tool clock {"tz": "UTC"}'})
        assert second.json()["reply"].startswith('clock returned {"tz": "UTC"')

        thread = (await client.get(thread_url("t1"))).json()
        assert [e["kind"] for e in thread["entries"]["items"]] == [
            "user", "assistant", "user", "assistant", "tool_result", "assistant"]
        assert thread["entries"]["items"][2]["user"] == "local"  # no tokens: the caller
        assert thread["runs_total"] == 2 and thread["runs"][1]["run_id"] == second.json()["run_id"]
        page = (await client.get(thread_url("t1"), params={"offset": 4, "limit": 1})).json()
        assert page["entries"]["total"] == 6 and page["entries"]["next_offset"] == 5
        assert page["entries"]["items"][0]["kind"] == "tool_result"

        run = (await client.get(f"/v1/runs/{second.json()['run_id']}")).json()
        assert run["text"] == '/tool clock {"tz": "UTC"}' and run["origin"]["channel"] == "http"
        assert run["origin"]["user"] == "local" and run["tool_calls"] == 1 and run["turns"] == 2
        assert [t["target"] for t in run["transitions"]] == [
            "running", "awaiting_tool", "running", "completed"]

        await client.post(thread_url("t2", "/messages"), json={"text": "other"})
        threads = (await client.get("/v1/threads", params={"limit": 1})).json()
        assert threads["total"] == 2 and threads["next_offset"] == 1
        assert threads["threads"][0]["thread_id"] == "t2"
        rest = (await client.get("/v1/threads", params={"offset": 1})).json()
        assert [t["thread_id"] for t in rest["threads"]] == ["t1"]
        assert rest["threads"][0]["entries"] == 6 and rest["next_offset"] is None

        runs = (await client.get("/v1/runs", params={"state": "completed", "limit": 2})).json()
        assert [r["thread_id"] for r in runs["runs"]] == ["t2", "t1"]  # newest first
        assert runs["next_offset"] == 2
        older = (await client.get("/v1/runs", params={"offset": 2, "limit": 2})).json()
        assert [r["run_id"] for r in older["runs"]] == [body["run_id"]]
        assert older["next_offset"] is None
        only_t2 = (await client.get("/v1/runs", params={"thread_id": "t2"})).json()
        assert [r["thread_id"] for r in only_t2["runs"]] == ["t2"]
        none = (await client.get("/v1/runs", params={"state": "failed"})).json()
        assert none["runs"] == []


async def test_streaming_a_run_as_server_sent_events(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _), \
            client.stream("POST", thread_url("s", "/messages"), headers=STREAM,
                          json={"text": '/tool clock {"tz": "UTC"}'}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [(kind, data) async for kind, data in sse(response)]
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "run.accepted" and kinds[-1] == "run.completed"
    for expected in ("run.started", "tool.call", "tool.result", "text.delta"):
        assert expected in kinds
    assert kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("text.delta")
    run_id = events[0][1]["run_id"]
    assert all(data["run_id"] == run_id for _, data in events)
    streamed = "".join(d["text"] for k, d in events if k == "text.delta")
    assert streamed == events[-1][1]["reply"] and streamed.startswith("clock returned")


async def test_idempotent_retries_return_the_same_run(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        url = thread_url("i", "/messages")
        key = {"Idempotency-Key": "req-1"}
        first = await client.post(url, json={"text": "once"}, headers=key)
        again = await client.post(url, json={"text": "once"}, headers=key)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        async with client.stream("POST", url, json={"text": "once"},
                                 headers={**key, **STREAM}) as response:
            events = [(kind, data) async for kind, data in sse(response)]
        assert [k for k, _ in events] == ["run.accepted", "run.completed"]
        assert events[1][1]["run_id"] == first.json()["run_id"]
        assert events[1][1]["reply"] == "echo: once"

        other = await client.post(url, json={"text": "something else"}, headers=key)
        assert other.status_code == 409 and other.headers["content-type"] == PROBLEM
        assert other.json()["code"] == "idempotency_key_reused"
        thread = (await client.get(thread_url("i"))).json()
        assert thread["runs_total"] == 1 and thread["entries"]["total"] == 2
        fresh = await client.post(url, json={"text": "once"}, headers={"Idempotency-Key": "2"})
        assert fresh.json()["run_id"] != first.json()["run_id"]


HOSTILE = ["a/b", "a_b", "../x", "..", ".", "a%2Fb", "héllo wörld ✓", "with spaces",
           "x/messages", "?#&", "日本語/スレッド"]


async def test_any_string_is_a_thread_id(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        for thread_id in HOSTILE:
            sent = await client.post(thread_url(thread_id, "/messages"),
                                     json={"text": f"to {thread_id}"})
            assert sent.status_code == 200, (thread_id, sent.text)
            assert sent.json()["thread_id"] == thread_id
        for thread_id in HOSTILE:  # look-alikes never share history
            got = (await client.get(thread_url(thread_id))).json()
            assert got["thread_id"] == thread_id
            assert [e["text"] for e in got["entries"]["items"]] == [
                f"to {thread_id}", f"echo: to {thread_id}"]
        listed = (await client.get("/v1/threads", params={"limit": 100})).json()["threads"]
        assert sorted(t["thread_id"] for t in listed) == sorted(HOSTILE)


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


async def test_approvals_over_http(tmp_path: Path) -> None:
    # Who decides is the token's name; mallory has a token with the right, but is not
    # among [agent] approvers.
    named = tokens(("alice", "t-alice"), ("mallory", "t-mallory"))
    as_mallory = {"Authorization": "Bearer t-mallory"}
    async with echo_runtime(tmp_path / "m.db", [deploy], approvers=["alice"]) as rt, \
            served(rt, credentials=named) as (client, _):
        paused = await client.post(thread_url("ops", "/messages"),
                                   json={"text": '/tool deploy {"service": "api"}'})
        assert paused.status_code == 200, paused.text
        run = paused.json()
        assert run["state"] == "awaiting_approval" and run["reply"] is None
        approval = run["approval"]
        assert approval["name"] == "deploy" and approval["arguments"] == {"service": "api"}
        call = approval["tool_call_id"]
        decide = f"/v1/runs/{run['run_id']}/approvals/{call}"

        stale = await client.post(f"/v1/runs/{run['run_id']}/approvals/other",
                                  json={"approve": True, "by": "alice"})
        assert stale.status_code == 409 and stale.json()["code"] == "stale_approval"
        wrong_hash = await client.post(decide, json={"approve": True, "by": "alice",
                                                     "arguments_hash": "nope"})
        assert wrong_hash.status_code == 409
        intruder = await client.post(decide, json={"approve": True}, headers=as_mallory)
        assert intruder.status_code == 403 and intruder.headers["content-type"] == PROBLEM
        assert intruder.json()["code"] == "not_an_approver"

        approved = await client.post(decide, json={
            "approve": True, "by": "alice", "reason": "ship it", "wait": True,
            "arguments_hash": approval["arguments_hash"]})
        assert approved.status_code == 200, approved.text
        assert approved.json()["state"] == "completed"
        assert approved.json()["reply"] == 'deploy returned "deployed api"'
        again = await client.post(decide, json={"approve": True, "by": "alice"})
        assert again.status_code == 409 and again.json()["code"] == "not_awaiting_approval"
        detail = (await client.get(f"/v1/runs/{run['run_id']}")).json()
        assert detail["decisions"][0]["by"] == "alice" and detail["decisions"][0]["approve"]

        denied_run = (await client.post(thread_url("ops", "/messages"),
                                        json={"text": '/tool deploy {"service": "db"}'})).json()
        denied = await client.post(
            f"/v1/runs/{denied_run['run_id']}/approvals/{denied_run['approval']['tool_call_id']}",
            json={"approve": False, "by": "alice", "wait": True})
        assert denied.json()["state"] == "completed"
        assert '"denied"' in denied.json()["reply"]


async def test_cancel_and_resume_over_http(tmp_path: Path) -> None:
    forever, stopped = until_cut_off()
    ops = tokens(("ops", "t-ops"))
    async with echo_runtime(tmp_path / "m.db", [forever]) as rt, \
            served(rt, credentials=ops) as (client, _):
        async with asyncio.timeout(10), client.stream(
                "POST", thread_url("c", "/messages"), json={"text": "/tool forever"},
                headers=STREAM) as response:
            events = sse(response)
            async for kind, data in events:
                if kind == "tool.call":
                    run_id = data["run_id"]
                    cancelled = await client.post(f"/v1/runs/{run_id}/cancel", json={})
                    break
            ends = [(kind, data) async for kind, data in events if kind.startswith("run.")]
        assert stopped.is_set()
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "cancelled"
        assert cancelled.json()["reason"] == "cancelled by ops"
        assert ends[-1][0] == "run.cancelled"
        again = await client.post(f"/v1/runs/{run_id}/cancel")
        assert again.status_code == 200 and again.json()["state"] == "cancelled"

        resumed = await client.post(f"/v1/runs/{run_id}/resume", params={"wait": True})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["state"] == "completed"
        assert "cancelled" in resumed.json()["reply"]
        refused = await client.post(f"/v1/runs/{run_id}/resume")
        assert refused.status_code == 409 and refused.json()["code"] == "not_resumable"
        done = await client.post(f"/v1/runs/{run_id}/cancel")
        assert done.status_code == 409 and done.json()["code"] == "already_ended"


async def test_unknown_runs_and_threads_are_404(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        for method, url in [("GET", "/v1/runs/nope"), ("GET", "/v1/runs/nope/events"),
                            ("POST", "/v1/runs/nope/cancel"), ("POST", "/v1/runs/nope/resume"),
                            ("GET", thread_url("never-written"))]:
            response = await client.request(method, url)
            assert response.status_code == 404, (url, response.text)
            assert response.headers["content-type"] == PROBLEM
            assert response.json()["status"] == 404 and response.json()["detail"]
        decide = await client.post("/v1/runs/nope/approvals/c1", json={"approve": True})
        assert decide.status_code == 404


async def test_bearer_token_when_configured(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        async with served(rt, token="s3cret-token-123") as (client, _):
            assert (await client.get("/v1/threads")).status_code == 200
            for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"},
                            {"Authorization": "Basic s3cret-token-123"}):
                denied = await client.get("/v1/threads", headers=headers)
                assert denied.status_code == 401, headers
                assert denied.headers["www-authenticate"].startswith("Bearer")
                assert denied.headers["content-type"] == PROBLEM
                assert "token" in denied.json()["detail"]
            posted = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                       headers={"Authorization": "Bearer nope"})
            assert posted.status_code == 401
            assert (await client.get("/metrics", headers={"Authorization": ""})).status_code \
                == 401
            assert (await client.get("/healthz", headers={"Authorization": ""})).status_code \
                == 200
            schema = (await client.get("/openapi.json")).json()
            assert "HTTPBearer" in schema["components"]["securitySchemes"]
        async with served(rt) as (client, _):
            assert (await client.get("/v1/threads")).status_code == 200


async def test_body_and_message_limits(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", max_message_chars=100) as rt, \
            served(rt, max_body_bytes=2048) as (client, _):
        url = thread_url("b", "/messages")
        big = await client.post(url, json={"text": "x" * 3000})
        assert big.status_code == 413 and big.headers["content-type"] == PROBLEM
        assert "2048 bytes" in big.json()["detail"]

        async def chunks() -> Any:
            yield b'{"text": "'
            for _ in range(10):
                yield b"y" * 300
            yield b'"}'

        chunked = await client.post(url, content=chunks(),
                                    headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413

        long = await client.post(url, json={"text": "z" * 101})
        assert long.status_code == 422 and long.headers["content-type"] == PROBLEM
        assert long.json()["errors"][0]["field"] == "body.text"
        assert "100 characters" in long.json()["detail"]
        assert (await client.post(url, json={"text": "z" * 100})).status_code == 200

        form = await client.post(url, content=b'{"text": "hi"}',
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert form.status_code == 422 and "Content-Type: application/json" in \
            form.json()["detail"]
        for bad in ({}, {"text": ""}, {"text": "hi", "extra": 1}, {"text": 5}):
            assert (await client.post(url, json=bad)).status_code == 422, bad
        assert (await client.post(url, content=b"{not json",
                                  headers={"Content-Type": "application/json"})
                ).status_code == 422


async def test_health_and_metrics(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, api):
        health = await client.get("/healthz")
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "version": metadata.version("maiden"),
                                 "store": "ok", "runtime": "ok", "detail": None,
                                 "channels": {"http": "serving"}}
        await client.post(thread_url("m", "/messages"), json={"text": '/tool clock {"tz": "UTC"}'})
        await client.post(thread_url("m", "/messages"), json={"text": "/tool nosuch"})
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200 and metrics.headers["content-type"].startswith(
            "text/plain")
        text = metrics.text
        assert 'maiden_runs{state="completed"} 2.0' in text
        assert 'maiden_runs{state="failed"} 0.0' in text
        assert "maiden_threads 1.0" in text
        assert 'maiden_run_ends_total{outcome="completed"} 2.0' in text
        assert 'maiden_tool_seconds_count{outcome="ok",tool="clock"} 1.0' in text
        assert 'maiden_tool_seconds_count{outcome="error",tool="nosuch"} 1.0' in text
        assert "maiden_turn_seconds_count 4.0" in text
        # The GenAI client metrics: one model call a turn.
        assert ('gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="chat",'
                'gen_ai_request_model="echo"} 4.0') in text
        assert ('gen_ai_client_token_usage_count{gen_ai_request_model="echo",'
                'gen_ai_token_type="input"} 4.0') in text
        input_tokens = next(float(line.split()[-1]) for line in text.splitlines()
                            if line.startswith('maiden_tokens_total{kind="input"}'))
        runs = (await client.get("/v1/runs")).json()["runs"]
        assert input_tokens == sum(r["usage"]["input_tokens"] for r in runs) > 0
        assert "maiden_recovered_runs 0.0" in text
        assert 'maiden_deliveries{status="pending"} 0.0' in text

        api.stop_intake()
        stopping = await client.get("/healthz")
        assert stopping.status_code == 503 and stopping.json()["runtime"] == "stopping"


async def test_shutdown_answers_waiting_requests_and_refuses_new_ones(tmp_path: Path) -> None:
    @tool
    async def slow() -> str:
        """Wait until the process stops."""
        await asyncio.Event().wait()
        return "never"

    async with echo_runtime(tmp_path / "m.db", [slow], shutdown_grace_s=0.2) as rt, \
            served(rt) as (client, api), rt.subscribe() as events:
        waiting = asyncio.create_task(
            client.post(thread_url("w", "/messages"), json={"text": "/tool slow"}))
        async with asyncio.timeout(10):
            while not isinstance(await events.next(), ToolCallStarted):
                pass
        api.stop_intake()
        refused = await client.post(thread_url("w", "/messages"), json={"text": "later"})
        assert refused.status_code == 503 and refused.json()["code"] == "shutting_down"
        assert refused.headers["retry-after"] == "5"
        await rt.close()
        api.release()
        answered = await asyncio.wait_for(waiting, 10)
        assert answered.status_code == 202
        assert answered.json()["state"] == "awaiting_tool"  # at its checkpoint, for later


async def test_following_a_run_with_keepalives(tmp_path: Path) -> None:
    go = asyncio.Event()

    @tool
    async def wait_for_it() -> str:
        """Wait for the test."""
        await go.wait()
        return "done"

    async with echo_runtime(tmp_path / "m.db", [wait_for_it]) as rt, \
            served(rt, keepalive_s=0.05) as (client, _), asyncio.timeout(10):
        accepted = await client.post(thread_url("f", "/messages"),
                                     json={"text": "/tool wait_for_it", "wait": False})
        assert accepted.status_code == 202
        run_id = accepted.json()["run_id"]
        seen: list[str] = []
        async with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            async for line in response.aiter_lines():
                seen.append(line)
                if line == ": keepalive":
                    go.set()  # quiet for a while, and the stream is still there
        ended = [line for line in seen if line.startswith("event: run.")]
        assert ended[-1] == "event: run.completed"
        assert 'data: {"run_id": "' + run_id in "\n".join(seen)
        # A run that already ended: its end, at once.
        async with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
            again = [kind async for kind, _ in sse(response)]
        assert again == ["run.completed"]


async def test_thread_ids_that_cannot_be_told_apart_are_refused(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        for raw in ("/v1/threads/a%FEb/messages", "/v1/threads/a%FFb/messages"):
            bad = await client.post(raw, json={"text": "hi"})
            assert bad.status_code == 422 and bad.json()["code"] == "invalid_thread_id"
            assert "UTF-8" in bad.json()["detail"]
        empty = await client.post("/v1/threads//messages", json={"text": "hi"})
        assert empty.status_code == 422 and empty.json()["code"] == "invalid_thread_id"
        listing = await client.get("/v1/threads/")
        assert listing.status_code == 422 and "GET /v1/threads" in listing.json()["detail"]
        blank = await client.post(thread_url("t", "/messages"), json={"text": "   "})
        assert blank.status_code == 422 and blank.json()["code"] == "invalid_message"
        assert (await client.get("/v1/threads")).json()["total"] == 0


async def test_every_problem_has_a_code(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        broken = await client.post(thread_url("t", "/messages"), content=b'{"text": "hi"',
                                   headers={"Content-Type": "application/json"})
        assert broken.status_code == 422 and broken.json()["code"] == "invalid_request"
        assert broken.json()["errors"][0]["field"] == "body"
        assert "not valid JSON" in broken.json()["detail"]
        missing = await client.get("/nowhere")
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
        wrong = await client.delete("/v1/threads")
        assert wrong.status_code == 405 and wrong.json()["code"] == "method_not_allowed"
        # No pages that load their assets from a CDN (blank offline); the schema is served.
        assert (await client.get("/docs")).status_code == 404
        assert (await client.get("/openapi.json")).status_code == 200


async def test_a_requests_traceparent_becomes_the_runs_trace(tmp_path: Path) -> None:
    """W3C trace context: a message's ``traceparent`` is the parent its run is traced
    under ([otel]); a malformed one is ignored."""
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        traced = await client.post(thread_url("t1", "/messages"), json={"text": "hello"},
                                   headers={"traceparent": parent})
        broken = await client.post(thread_url("t1", "/messages"), json={"text": "again"},
                                   headers={"traceparent": "00-zz-not-a-trace"})
        plain = await client.post(thread_url("t2", "/messages"), json={"text": "hi"})
        runs = [await rt.records.get_run(r.json()["run_id"]) for r in (traced, broken, plain)]
    assert [r.trace for r in runs] == [parent, "", ""]
