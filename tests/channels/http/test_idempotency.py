"""Idempotency keys belong to their caller and their body (DESIGN §6), on every route that
takes one: the threads API, ``/v1/chat/completions``, ``/v1/responses`` and a schedule's
run now. The same key
from another caller is another request; the same key with another body is ``409``, in the
route's own error shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from schedules import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled, served, thread_url, tokens

ANA = {"Authorization": "Bearer t-ana"}
BOB = {"Authorization": "Bearer t-bob"}

Send = Callable[[httpx.AsyncClient, dict[str, str], str, str], Awaitable[httpx.Response]]


async def _thread_message(client: httpx.AsyncClient, auth: dict[str, str], key: str,
                          text: str) -> httpx.Response:
    # Each caller on a thread of its own: another's thread is not theirs to write into.
    thread = "ana's" if auth is ANA else "bob's"
    return await client.post(thread_url(thread, "/messages"), json={"text": text},
                             headers={**auth, "Idempotency-Key": key})


async def _chat(client: httpx.AsyncClient, auth: dict[str, str], key: str,
                text: str) -> httpx.Response:
    return await client.post("/v1/chat/completions", json={
        "model": "maiden", "messages": [{"role": "user", "content": text}]},
        headers={**auth, "Idempotency-Key": key})


async def _responses(client: httpx.AsyncClient, auth: dict[str, str], key: str,
                     text: str) -> httpx.Response:
    return await client.post("/v1/responses", json={"model": "maiden", "input": text},
                             headers={**auth, "Idempotency-Key": key})


def _said(route: str, response: httpx.Response) -> str:
    body: Any = response.json()
    if route == "threads":
        return str(body["reply"])
    if route == "chat":
        return str(body["choices"][0]["message"]["content"])
    return str(body["output"][-1]["content"][0]["text"])


def _code(route: str, response: httpx.Response) -> str:
    body: Any = response.json()
    return str(body["code"] if route == "threads" else body["error"]["code"])


ROUTES: dict[str, Send] = {"threads": _thread_message, "chat": _chat, "responses": _responses}


@pytest.mark.parametrize("route", ROUTES)
async def test_a_key_belongs_to_its_caller_and_its_body(tmp_path: Path, route: str) -> None:
    send = ROUTES[route]
    named = tokens(("ana", "t-ana"), ("bob", "t-bob", ["talk"]))
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=named) as (client, _):
        first = await send(client, ANA, "k-1", "ana's question")
        assert first.status_code == 200, first.text
        assert _said(route, first) == "echo: ana's question"
        # Retried by Ana: the same run, nothing new.
        again = await send(client, ANA, "k-1", "ana's question")
        assert again.status_code == 200 and _said(route, again) == "echo: ana's question"
        assert len(await rt.records.runs()) == 1
        # Bob with Ana's key: his own request, answered with his own message.
        bobs = await send(client, BOB, "k-1", "bob's question")
        assert bobs.status_code == 200, bobs.text
        assert _said(route, bobs) == "echo: bob's question"
        assert len(await rt.records.runs()) == 2
        # Ana's key again with another body: refused, and nothing is dropped silently.
        other = await send(client, ANA, "k-1", "another question")
        assert other.status_code == 409, other.text
        assert _code(route, other) == "idempotency_key_reused"
        if route != "threads":
            assert set(other.json()) == {"error"}  # OpenAI's error shape
        assert len(await rt.records.runs()) == 2
        assert "another question" not in [r.text for r in await rt.records.runs()]


async def test_a_schedule_run_now_sent_again_with_its_key_is_the_same_run(
        tmp_path: Path) -> None:
    """A client whose run-now request got no answer (its connection cut, a replica killed)
    sends it again, to another replica, with the same key: that is the same run, not a
    second one (chaos finding: the route ignored the key, each request made a new run)."""
    db = tmp_path / "m.db"
    configs = [ScheduleConfig(name="daily", cron="0 9 * * *", prompt="the daily check")]
    named = tokens(("ana", "t-ana"), ("bob", "t-bob"))
    clock = Clock(datetime(2026, 3, 2, 8, 55, tzinfo=UTC))
    async with echo_runtime(db) as rt, scheduled(rt, db, configs, clock) as scheduler, \
            served(rt, credentials=named, schedules=scheduler) as (client, _):
        first = await client.post("/v1/schedules/daily/run",
                                  headers={**ANA, "Idempotency-Key": "now-1"})
        assert first.status_code == 200, first.text
        again = await client.post("/v1/schedules/daily/run",
                                  headers={**ANA, "Idempotency-Key": "now-1"})
        assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]
        # Another key, Bob's same key, or none: each a run of its own.
        other = await client.post("/v1/schedules/daily/run",
                                  headers={**ANA, "Idempotency-Key": "now-2"})
        bobs = await client.post("/v1/schedules/daily/run",
                                 headers={**BOB, "Idempotency-Key": "now-1"})
        bare = await client.post("/v1/schedules/daily/run", headers=ANA)
        ids = {r.json()["run_id"] for r in (first, other, bobs, bare)}
        assert len(ids) == 4
        runs = await rt.records.runs()
        assert sorted(r.id for r in runs) == sorted(ids)
        assert all(str(r.idempotency_key).startswith("schedule:daily:manual:") for r in runs)
