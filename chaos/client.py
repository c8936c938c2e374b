"""How the soak's people talk to the replicas: one message through one route, a cancel,
an approval decision, and the reads the invariants need (every run, every thread).

Each call goes to one replica; the workload decides which and sends again elsewhere on
a transport error or a 5xx, with the same ``Idempotency-Key``, as a client behind a load
balancer does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from .files import data_of, media_type
from .plan import Op
from .system import token_of

__all__ = ["Answer", "Client", "Refused", "thread_path"]


def thread_path(thread: str, suffix: str = "") -> str:
    return f"/v1/threads/{quote(thread, safe='').replace('.', '%2E')}{suffix}"


class Refused(Exception):
    """A replica answered with a status the soak does not send again on (a 4xx)."""


@dataclass
class Answer:
    """What the client got back: the run's id (the message was accepted) and, if the
    answer came, the reply text and the state; ``ended`` whether a stream said how the
    run ended (or paused) rather than being cut off."""

    run_id: str | None
    state: str | None = None
    reply: str | None = None
    status: int = 0
    ended: bool = True


class Client:
    def __init__(self) -> None:
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=3.0),
                                      limits=httpx.Limits(max_connections=200))

    async def aclose(self) -> None:
        await self.http.aclose()

    @staticmethod
    def _auth(person: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token_of(person)}"}

    async def send(self, base: str, op: Op, key: str) -> Answer:
        """Send ``op`` once to the replica at ``base``; raises httpx errors and ``Refused``;
        an ``Answer`` with no run id for a status to send again on (5xx)."""
        headers = {**self._auth(op.person), "Idempotency-Key": key}
        if op.route.startswith("openai"):
            headers["X-Maiden-Thread"] = op.thread
            body: dict[str, Any] = {"model": "chaos", "stream": op.route == "openai_stream",
                                    "messages": [{"role": "user", "content": op.text}]}
            url = base + "/v1/chat/completions"
        else:
            body = {"text": op.text, "wait": op.wait}
            url = base + thread_path(op.thread, "/messages")
            if op.files and op.via == "json":  # the JSON's files, their bytes in base64
                body["files"] = [{"name": name, "media_type": media_type(name),
                                  "data": base64.b64encode(data_of(name)).decode()}
                                 for name in op.files]
        if op.route.endswith("stream"):
            headers["Accept"] = "text/event-stream"
            async with self.http.stream("POST", url, json=body, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    return _status(response)
                if op.route == "openai_stream":
                    return await _openai_stream(response)
                return await _run_stream(response)
        if op.files and op.via != "json":  # multipart/form-data: its JSON, a part per file
            response = await self.http.post(url, headers=headers, data={
                "message": json.dumps(body)}, files=[
                ("file", (name, data_of(name), media_type(name))) for name in op.files])
        else:
            response = await self.http.post(url, json=body, headers=headers)
        if response.status_code not in (200, 202):
            return _status(response)
        if op.route == "openai":
            content = response.json()["choices"][0]["message"]["content"]
            return Answer(response.headers.get("x-maiden-run"), None, content, 200)
        out = response.json()
        return Answer(out["run_id"], out["state"], out.get("reply"), response.status_code)

    async def cancel(self, base: str, person: str, run_id: str) -> int:
        response = await self.http.post(f"{base}/v1/runs/{run_id}/cancel", json={},
                                         headers=self._auth(person))
        return response.status_code

    async def decide(self, base: str, person: str, run_id: str, call: str, approve: bool
                     ) -> int:
        response = await self.http.post(
            f"{base}/v1/runs/{run_id}/approvals/{call}", headers=self._auth(person),
            json={"approve": approve, "reason": "chaos", "wait": False})
        return response.status_code

    async def runs(self, base: str, person: str, **params: Any) -> list[dict[str, Any]]:
        """Every run matching ``params`` (all pages), newest first."""
        out: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            response = await self.http.get(f"{base}/v1/runs", headers=self._auth(person),
                                           params={**params, "limit": 500, "offset": offset})
            response.raise_for_status()
            page = response.json()
            out += page["runs"]
            offset = page.get("next_offset")
        return out

    async def run(self, base: str, person: str, run_id: str) -> dict[str, Any]:
        response = await self.http.get(f"{base}/v1/runs/{run_id}", headers=self._auth(person))
        response.raise_for_status()
        return dict(response.json())

    async def feedback(self, base: str, person: str) -> list[dict[str, Any]]:
        """Every vote on an answer (``GET /v1/feedback``, all pages), oldest first."""
        out: list[dict[str, Any]] = []
        since: float | None = None
        while True:
            params: dict[str, Any] = {"limit": 1000} | ({} if since is None else {"since": since})
            response = await self.http.get(f"{base}/v1/feedback", headers=self._auth(person),
                                           params=params)
            response.raise_for_status()
            page = response.json()
            out += page["votes"]
            since = page.get("next_since")
            if since is None:
                return out

    async def threads(self, base: str, person: str) -> list[str]:
        """Every thread's id."""
        out: list[str] = []
        offset: int | None = 0
        while offset is not None:
            response = await self.http.get(f"{base}/v1/threads", headers=self._auth(person),
                                           params={"limit": 500, "offset": offset})
            response.raise_for_status()
            page = response.json()
            out += [t["thread_id"] for t in page["threads"]]
            offset = page.get("next_offset")
        return out

    async def thread(self, base: str, person: str, thread: str) -> list[dict[str, Any]]:
        """Every entry of ``thread``, oldest first ([] for a thread never made)."""
        out: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            response = await self.http.get(base + thread_path(thread), headers=self._auth(
                person), params={"limit": 1000, "offset": offset, "runs_limit": 1})
            if response.status_code == 404:
                return []
            response.raise_for_status()
            page = response.json()["entries"]
            out += page["items"]
            offset = page.get("next_offset")
        return out


def _status(response: httpx.Response) -> Answer:
    if response.status_code >= 500 or response.status_code == 429:
        return Answer(None, status=response.status_code)
    raise Refused(f"{response.status_code} {response.text[:300]}")


_ENDS = {"run.completed", "run.failed", "run.cancelled", "run.timed_out", "run.paused"}


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """A server-sent event stream's events, as (event name, its JSON data)."""
    event = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            yield event, json.loads(line[6:])


async def _run_stream(response: httpx.Response) -> Answer:
    answer = Answer(None, status=200, ended=False)
    async for event, data in sse(response):
        if event == "run.accepted":
            answer.run_id = data["run_id"]
        elif event in _ENDS:
            answer.state = data.get("state", event[4:])
            answer.reply = data.get("reply")
            answer.ended = True
    return answer


async def _openai_stream(response: httpx.Response) -> Answer:
    answer = Answer(response.headers.get("x-maiden-run"), status=200, ended=False, reply="")
    async for line in response.aiter_lines():
        if line == "data: [DONE]":
            answer.ended = True
        elif line.startswith("data: "):
            for choice in json.loads(line[6:]).get("choices") or ():
                answer.reply = (answer.reply or "") + (choice["delta"].get("content") or "")
    return answer
