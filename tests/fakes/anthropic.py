"""A fake Anthropic Messages API: checks requests by the real API's rules, plays replies."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from .server import End, FakeServer, Reply, sse

__all__ = ["AnthropicServer", "error", "files_seen", "message", "stream"]

MODEL = "claude-sonnet-4-5-20250929"


def error(status: int, kind: str, text: str, **headers: str) -> Reply:
    return Reply(status=status, headers=headers, json={
        "type": "error", "error": {"type": kind, "message": text},
        "request_id": "req_011CFakeFakeFake"})


def _usage(input_tokens: int, output_tokens: int, cache_write: int, cache_read: int
           ) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "cache_creation": {"ephemeral_5m_input_tokens": cache_write,
                               "ephemeral_1h_input_tokens": 0},
            "output_tokens": output_tokens, "service_tier": "standard"}


def message(text: str = "", calls: Sequence[tuple[str, str, Any]] = (), *,
            stop_reason: str | None = None, usage: tuple[int, int, int, int] = (50, 10, 0, 0)
            ) -> Reply:
    """A non-streamed Messages reply; ``calls`` are ``(id, name, input)``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return Reply(json={
        "id": "msg_01FakeFakeFake", "type": "message", "role": "assistant", "model": MODEL,
        "content": content, "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None, "usage": _usage(*usage)})


def stream(text: Sequence[str] = (), calls: Sequence[tuple[str, str, Sequence[str]]] = (), *,
           stop_reason: str | None = None, usage: tuple[int, int, int, int] = (50, 10, 0, 0),
           complete: bool = True, chunks: int | Sequence[int] = 0,
           end: End = "eof") -> Reply:
    """A streamed reply: text deltas, then tool calls ``(id, name, json fragments)``.
    ``complete=False`` leaves out message_delta and message_stop."""
    start_usage = _usage(usage[0], 1, usage[2], usage[3])
    events: list[tuple[str | None, Any]] = [("message_start", {
        "type": "message_start", "message": {
            "id": "msg_01FakeFakeFake", "type": "message", "role": "assistant", "model": MODEL,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    index = 0
    if text:
        events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
        events.append(("ping", {"type": "ping"}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": t}})
                   for t in text]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for call_id, name, fragments in calls:
        events.append(("content_block_start", {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}))
        events += [("content_block_delta", {
            "type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": f}}) for f in fragments]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if complete:
        events.append(("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
                      "stop_sequence": None},
            "usage": {"output_tokens": usage[1]}}))
        events.append(("message_stop", {"type": "message_stop"}))
    return Reply(sse=sse(events), chunks=chunks, end=end)


def _bad(text: str) -> Reply:
    return error(400, "invalid_request_error", text)


class AnthropicServer(FakeServer):
    """``POST /v1/messages`` with the real API's request checks."""

    path = "/v1/messages"

    def __init__(self, api_key: str = "sk-ant-test-key",
                 context_tokens: int | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.context_tokens = context_tokens
        """A model's context size: a longer prompt is refused as the real API does (tokens
        counted as four characters each, of the system, tools and messages' JSON)."""

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        if "x-api-key" not in headers:
            return error(401, "authentication_error", "x-api-key header is required")
        if headers["x-api-key"] != self.api_key:
            return error(401, "authentication_error", "invalid x-api-key")
        if headers.get("anthropic-version") != "2023-06-01":
            return _bad("anthropic-version: header is required")
        if not isinstance(body, dict):
            return _bad("There was an error parsing the body of your request.")
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return _bad(f"{key}: Field required")
        tools = {t["name"] for t in body.get("tools", [])}
        for t in body.get("tools", []):
            if t.get("input_schema", {}).get("type") != "object":
                return _bad(f"tools.{t['name']}.input_schema.type: Input should be 'object'")
        problem = _check_messages(body["messages"], bool(tools))
        if problem:
            return _bad(problem)
        marks = sum("cache_control" in b for b in _blocks(body))
        if marks > 4:
            return _bad(f"A maximum of 4 blocks with cache_control may be provided. "
                        f"Found {marks}.")
        used = len(json.dumps([body.get("system"), body.get("tools"), body["messages"]])) // 4
        if self.context_tokens is not None and used + body["max_tokens"] > self.context_tokens:
            return _bad(f"prompt is too long: {used} tokens > "
                        f"{self.context_tokens - body['max_tokens']} maximum")
        return None


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body.get("system", [])
    return ([*body.get("tools", []), *(system if isinstance(system, list) else [])]
            + [b for m in body["messages"] for b in m["content"]])


def _check_messages(messages: list[dict[str, Any]], has_tools: bool) -> str | None:
    if not messages:
        return "messages: at least one message is required"
    if messages[0]["role"] != "user":
        return "messages: first message must use the \"user\" role"
    open_ids: list[str] = []
    for i, m in enumerate(messages):
        if i and m["role"] == messages[i - 1]["role"]:
            return f"messages.{i}: roles must alternate between \"user\" and \"assistant\""
        if not isinstance(m["content"], list) or not m["content"]:
            return f"messages.{i}: all messages must have non-empty content"
        blocks = m["content"]
        if any(b["type"] == "text" and not b["text"].strip() for b in blocks):
            return f"messages.{i}: text content blocks must contain non-whitespace text"
        if any(b["type"] in ("tool_use", "tool_result") for b in blocks) and not has_tools:
            return "Requests which include `tool_use` or `tool_result` blocks must define tools."
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if open_ids:
            lead = [b.get("tool_use_id") for b in blocks[:len(open_ids)]]
            if sorted(x for x in lead if x) != sorted(open_ids):
                return (f"messages.{i}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {', '.join(open_ids)}")
        elif results:
            return (f"messages.{i}.content.0: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {results[0]}")
        for j, b in enumerate(blocks):
            problem = _check_source(b, f"messages.{i}.content.{j}")
            if problem is not None:
                return problem
        open_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if any(not isinstance(b["input"], dict) for b in blocks if b["type"] == "tool_use"):
            return f"messages.{i}: tool_use.input: Input should be a valid dictionary"
    if open_ids:
        return "messages: the final `tool_use` blocks have no `tool_result` after them"
    return None


_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _check_source(block: dict[str, Any], where: str) -> str | None:
    """An image or document block as the real API checks it: a base64 source of a type it
    takes, whose data decodes."""
    kind = block["type"]
    if kind not in ("image", "document"):
        return None
    source = block.get("source") or {}
    media = source.get("media_type")
    if source.get("type") != "base64":
        return f"{where}.{kind}.source: only base64 sources are accepted here"
    allowed = _IMAGE_TYPES if kind == "image" else ("application/pdf",)
    if media not in allowed:
        return f"{where}.{kind}.source.base64.media_type: Input should be " + " or ".join(
            f"'{t}'" for t in allowed)
    try:
        base64.b64decode(source.get("data", ""), validate=True)
    except ValueError:
        return f"{where}.{kind}.source.base64.data: invalid base64 data"
    return None


def files_seen(body: dict[str, Any]) -> list[tuple[str, str]]:
    """What a request showed the model of files: ``(block type, media type or text)`` for
    each image, document, and text block that frames a file, in order."""
    seen = []
    for m in body["messages"]:
        for b in m["content"]:
            if b["type"] in ("image", "document"):
                seen.append((b["type"], b["source"]["media_type"]))
            elif b["type"] == "text" and b["text"].startswith(("[file ", "[image ", "[PDF ")):
                seen.append(("text", b["text"]))
    return seen
