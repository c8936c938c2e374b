"""A fake OpenAI Chat Completions API: checks requests by the real API's rules, plays replies."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from .server import End, FakeServer, Reply, sse

__all__ = ["OpenAIServer", "completion", "error", "files_seen", "stream"]

MODEL = "gpt-4.1-2025-04-14"
_ID = "chatcmpl-FakeFakeFakeFake"


def error(status: int, text: str, kind: str = "invalid_request_error", code: str | None = None,
          **headers: str) -> Reply:
    return Reply(status=status, headers=headers, json={
        "error": {"message": text, "type": kind, "param": None, "code": code}})


def _usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def completion(text: str | None = None, calls: Sequence[tuple[str, str, str]] = (), *,
               finish_reason: str | None = None, usage: tuple[int, int, int] = (50, 10, 0)
               ) -> Reply:
    """A non-streamed reply; ``calls`` are ``(id, name, arguments JSON string)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None,
                               "annotations": []}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": a}} for i, n, a in calls]
    return Reply(json={
        "id": _ID, "object": "chat.completion", "created": 1742329412, "model": MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason or ("tool_calls" if calls else "stop")}],
        "usage": _usage(*usage), "service_tier": "default", "system_fingerprint": "fp_fake"})


def _chunk(delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, Any] | None = None) -> dict[str, Any]:
    choices = [] if delta is None else [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return {"id": _ID, "object": "chat.completion.chunk", "created": 1742329416, "model": MODEL,
            "service_tier": "default", "system_fingerprint": "fp_fake", "choices": choices,
            "usage": usage}


def stream(text: Sequence[str] = (), calls: Sequence[tuple[str, str, Sequence[str]]] = (), *,
           finish_reason: str | None = None, usage: tuple[int, int, int] = (50, 10, 0),
           done: bool = True, chunks: int | Sequence[int] = 0,
           end: End = "eof") -> Reply:
    """A streamed reply: text deltas, then tool calls ``(id, name, argument fragments)``.
    ``done=False`` leaves out the usage chunk and ``[DONE]``."""
    events: list[tuple[str | None, Any]] = [
        (None, _chunk({"role": "assistant", "content": "", "refusal": None}))]
    events += [(None, _chunk({"content": t})) for t in text]
    for index, (call_id, name, fragments) in enumerate(calls):
        events.append((None, _chunk({"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""}}]})))
        events += [(None, _chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}))
                   for f in fragments]
    if done:
        events.append((None, _chunk({}, finish_reason or ("tool_calls" if calls else "stop"))))
        events.append((None, _chunk(None, usage=_usage(*usage))))
        events.append((None, "[DONE]"))
    return Reply(sse=sse(events), chunks=chunks, end=end)


class OpenAIServer(FakeServer):
    """``POST /v1/chat/completions`` with the real API's request checks."""

    path = "/v1/chat/completions"

    def __init__(self, api_key: str | None = "sk-test-key",
                 context_tokens: int | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.context_tokens = context_tokens
        """A model's context size: a longer prompt is refused as the real API does (tokens
        counted as four characters each, the messages' JSON)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        if self.api_key is not None:
            auth = headers.get("authorization", "")
            if not auth:
                return error(401, "You didn't provide an API key. You need to provide your API "
                             "key in an Authorization header using Bearer auth.")
            if auth != f"Bearer {self.api_key}":
                return error(401, f"Incorrect API key provided: {auth[7:14]}***.",
                             code="invalid_api_key")
        if not isinstance(body, dict):
            return error(400, "We could not parse the JSON body of your request.")
        for key in ("model", "messages"):
            if key not in body:
                return error(400, f"Missing required parameter: '{key}'.")
        if "stream_options" in body and not body.get("stream"):
            return error(400, "The 'stream_options' parameter is only allowed when 'stream' "
                         "is enabled.")
        for t in body.get("tools", []):
            if t.get("type") != "function" or "name" not in t.get("function", {}):
                return error(400, "Missing required parameter: 'tools[0].function'.")
        problem = _check_messages(body["messages"])
        if problem is not None:
            return error(400, problem)
        used = len(json.dumps(body["messages"])) // 4
        if self.context_tokens is not None and used > self.context_tokens:
            return error(400, f"This model's maximum context length is {self.context_tokens} "
                         f"tokens. However, your messages resulted in {used} tokens. Please "
                         "reduce the length of the messages.", code="context_length_exceeded")
        return None


def _check_messages(messages: list[dict[str, Any]]) -> str | None:
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "user" and isinstance(m.get("content"), list):
            problem = _check_parts(m["content"], i)
            if problem is not None:
                return problem
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'user', ..."
        if role == "tool":
            if m.get("tool_call_id") not in open_ids:
                return (f"Invalid parameter: messages with role 'tool' must be a response to "
                        f"a preceeding message with 'tool_calls'. (messages[{i}])")
            if not isinstance(m.get("content"), str):
                return f"Invalid type for 'messages[{i}].content': expected a string."
            open_ids.discard(m["tool_call_id"])
            continue
        if open_ids:
            return ("An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(sorted(open_ids))}")
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                if not isinstance(call["function"]["arguments"], str):
                    return (f"Invalid type for 'messages[{i}].tool_calls[0].function.arguments'"
                            ": expected a string.")
                open_ids.add(call["id"])
            if m.get("content") is None and not m.get("tool_calls"):
                return f"Invalid value for 'messages[{i}].content': expected a string."
    if open_ids:
        return f"tool_call_ids did not have response messages: {', '.join(sorted(open_ids))}"
    return None


def _check_parts(parts: list[dict[str, Any]], i: int) -> str | None:
    """A user message's content parts as the real API checks them."""
    for j, part in enumerate(parts):
        where = f"messages[{i}].content[{j}]"
        kind = part.get("type")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                return f"Invalid type for '{where}.text': expected a string."
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if not url.startswith(("https://", "http://", "data:image/")):
                return f"Invalid '{where}.image_url.url': expected a URL or a base64 data URL."
            if url.startswith("data:") and not _decodes(url):
                return f"Invalid '{where}.image_url.url': the base64 data does not decode."
        elif kind == "file":
            data = (part.get("file") or {}).get("file_data", "")
            if not data.startswith("data:application/pdf;base64,") or not _decodes(data):
                return f"Invalid '{where}.file.file_data': expected base64 PDF data."
        else:
            return (f"Invalid value: '{kind}'. Supported values are: 'text', 'image_url', "
                    "'input_audio', 'refusal', and 'file'.")
    return None


def _decodes(url: str) -> bool:
    try:
        base64.b64decode(url.split(",", 1)[1], validate=True)
    except (ValueError, IndexError):
        return False
    return True


def files_seen(body: dict[str, Any]) -> list[tuple[str, str]]:
    """What a request showed the model of files: ``(part type, media type, file name or
    text)`` for each image, file, and text part that frames a file, in order: ``(type,
    media type)`` for an image, ``(type, file name)`` for a file, ``(type, text)``."""
    seen = []
    for m in body["messages"]:
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        for part in content:
            if part["type"] == "image_url":
                seen.append(("image_url", part["image_url"]["url"].split(";", 1)[0][5:]))
            elif part["type"] == "file":
                seen.append(("file", part["file"]["filename"]))
            elif part["text"].startswith(("[file ", "[image ", "[PDF ")):
                seen.append(("text", part["text"]))
    return seen
