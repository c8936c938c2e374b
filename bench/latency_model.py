"""A model that takes its time, as a server: a tiny OpenAI-compatible Chat Completions
endpoint on 127.0.0.1 for the replica run (workload 9).

``python -m bench.latency_model --latency 0.1`` prints ``port N`` on stdout once it
listens, then answers ``POST /v1/chat/completions`` after sleeping ``latency`` seconds:
the workload's model (``bench.workload.LookupModel``) over the wire. A request whose last
message is the user's gets a ``lookup`` tool call, any other the answer. Streamed (SSE
chunks as OpenAI sends them, then ``[DONE]``) when the request asks for it, one JSON
completion otherwise. ``GET /stats`` answers the requests seen so far (a retry shows up
as more requests than model calls) and the connections they came on (a client that keeps
its connections alive makes few; a connection that asked only for ``/stats``, the bench's
own, is not counted).

A plain asyncio server, HTTP/1.1 with keep-alive: a process of its own, so its CPU is
counted apart from the replicas' and the clients'.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from .workload import ANSWER

__all__ = ["main"]

MODEL = "bench-latency"
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.connections = 0
        self.streamed = 0
        self.bad = 0
        self.inflight = 0
        self.max_inflight = 0


def _chunk(delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, Any] | None = None) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": MODEL, "choices": choices, "usage": usage}
    return f"data: {json.dumps(body)}\n\n"


def _answer(body: dict[str, Any]) -> tuple[str | None, tuple[str, str] | None]:
    """The reply to ``body``: text, or a ``lookup`` call (its id and arguments)."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "user":
        content = str(last.get("content") or "")
        return None, (f"call_{len(messages)}", json.dumps({"query": content[:16]}))
    return ANSWER, None


def _streamed(text: str | None, call: tuple[str, str] | None) -> bytes:
    parts = [_chunk({"role": "assistant", "content": ""})]
    if text is not None:
        parts += [_chunk({"content": text[:20]}), _chunk({"content": text[20:]})]
    if call is not None:
        parts.append(_chunk({"tool_calls": [{"index": 0, "id": call[0], "type": "function",
                                             "function": {"name": "lookup",
                                                          "arguments": call[1]}}]}))
    parts.append(_chunk({}, "tool_calls" if call else "stop"))
    parts.append(_chunk(None, usage=USAGE))
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def _whole(text: str | None, call: tuple[str, str] | None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [{"id": call[0], "type": "function",
                                  "function": {"name": "lookup", "arguments": call[1]}}]
    return json.dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                       "model": MODEL, "usage": USAGE,
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": "tool_calls" if call else "stop"}]}
                      ).encode()


def _response(status: str, kind: str, payload: bytes) -> bytes:
    head = (f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\n"
            f"content-length: {len(payload)}\r\nconnection: keep-alive\r\n\r\n")
    return head.encode() + payload


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: Stats,
                 latency_s: float) -> None:
    counted = False
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target = [*lines[0].split(" "), "", ""][:2]
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            length = int(headers.get("content-length") or 0)
            raw = await reader.readexactly(length) if length else b""
            if method == "GET" and target == "/stats":
                writer.write(_response("200 OK", "application/json", json.dumps(
                    {"requests": stats.requests, "connections": stats.connections,
                     "streamed": stats.streamed, "bad": stats.bad,
                     "max_inflight": stats.max_inflight}).encode()))
            elif method == "POST" and target.endswith("/chat/completions"):
                stats.requests += 1
                if not counted:
                    stats.connections += 1
                    counted = True
                stats.inflight += 1
                stats.max_inflight = max(stats.max_inflight, stats.inflight)
                try:
                    body = json.loads(raw)
                    text, call = _answer(body)
                    await asyncio.sleep(latency_s)
                finally:
                    stats.inflight -= 1
                if body.get("stream"):
                    stats.streamed += 1
                    writer.write(_response("200 OK", "text/event-stream",
                                           _streamed(text, call)))
                else:
                    writer.write(_response("200 OK", "application/json", _whole(text, call)))
            else:
                stats.bad += 1
                writer.write(_response("404 Not Found", "text/plain", b"no such route"))
            await writer.drain()
    except Exception as exc:  # a bench helper: say what broke, keep serving others
        stats.bad += 1
        print(f"latency model: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    finally:
        writer.close()


async def _main(latency_s: float, port: int) -> None:
    stats = Stats()
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, stats, latency_s), "127.0.0.1", port, backlog=512)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_model")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per model call")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.latency, args.port))


if __name__ == "__main__":
    main()
