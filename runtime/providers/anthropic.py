"""Anthropic's Messages API (``POST /v1/messages``), plain or streamed over SSE.

Prompt caching: ``cache_control`` breakpoints go on the system prompt (which
caches the tools before it too), on the newest message, and on the user turn
before the newest assistant turn, so each turn of a long thread re-reads the
previous turn's prefix from the cache.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ProviderError
from ..model.attachments.parts import DocumentPart, FilePart, ImagePart, Seeing
from ..model.entries import AssistantTurn, Entry, Notice, ToolCall, ToolResult, Usage, UserMessage
from .base import ModelRequest, ModelResponse, TextSink
from .http import HttpTransport, Retry, ServerSentEvent, parse_json
from .models import context_window
from .stream import exchange
from .wire import notice_text, pair_results, part_for, result_text, tool_arguments

__all__ = ["AnthropicProvider", "to_messages"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
NAME = "anthropic"
_CACHE = {"type": "ephemeral"}
SEES_ALL = Seeing(images=True, pdfs=True)


class AnthropicProvider:
    """Talks to Claude through the Messages API; streams when given an ``on_text`` sink."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        base_url: str = DEFAULT_BASE_URL,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 60.0,
        retry: Retry | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        stream: bool = True,
        seeing: Seeing = SEES_ALL,
    ) -> None:
        self.model = model
        self.seeing = seeing
        """What the model is shown of files: images and PDFs as such, unless turned off."""
        self.max_output_tokens = max_output_tokens or DEFAULT_MAX_TOKENS
        self.context_window = context_window(model, self.max_output_tokens)
        """Tokens of prompt a request may hold: the loop's default window."""
        self.temperature = temperature
        self.stream = stream
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self.transport = HttpTransport(
            NAME, base_url.rstrip("/") + "/v1/messages", headers, client=client,
            timeout_s=timeout_s, retry=retry, api_key_env=api_key_env, has_key=bool(api_key))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider made it."""
        await self.transport.aclose()

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON a request is sent as."""
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": self.max_output_tokens,
            "messages": to_messages(request.entries, request.files),
        }
        if request.system:
            body["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                 for t in request.tools]
        if not tools and _uses_tools(body["messages"]):
            # The API refuses tool blocks in a request that defines no tools; on a turn
            # that offers none, describe the ones in the history and forbid using them.
            tools = _placeholder_tools(request.entries)
            body["tool_choice"] = {"type": "none"}
        if tools:
            if not request.system:
                tools[-1]["cache_control"] = _CACHE
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if stream:
            body["stream"] = True
        return body

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse:
        stream = self.stream and on_text is not None
        return await exchange(
            self.transport, self.body(request, stream=stream), on_text,
            whole=lambda content: _from_message(parse_json(NAME, content, "response body")),
            assembler=_StreamState() if stream else None)


# -- entries -> messages --------------------------------------------------------------------

def to_messages(entries: Sequence[Entry], files: Mapping[str, FilePart] | None = None
                ) -> list[dict[str, Any]]:
    """Our history as Messages API turns: alternating roles, results first in a user turn;
    a message's files (``files``, by digest) before its text, as image, document or text
    blocks."""
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for entry in pair_results(entries):
        if isinstance(entry, UserMessage):
            shown = [_file_block(part_for(f, files)) for f in entry.files]
            add("user", [*shown, _text(entry.text or ("(files only)" if shown
                                                       else "(empty message)"))])
        elif isinstance(entry, Notice):
            add("user", [_text(notice_text(entry))])
        elif isinstance(entry, AssistantTurn):
            blocks = [_text(entry.text)] if entry.text else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                        "input": _input(c.arguments)} for c in entry.tool_calls]
            add("assistant", blocks)
        elif isinstance(entry, ToolResult):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": entry.tool_call_id,
                                     "content": result_text(entry.content)}
            if entry.images:  # shown with the result
                block["content"] = [_text(block["content"]), *(
                    _file_block(part_for(ref, files)) for ref in entry.images)]
            if entry.is_error:
                block["is_error"] = True
            add("user", [block])
    for message in messages:
        if message["role"] == "user":  # the API wants tool_result blocks before any text
            message["content"].sort(key=lambda b: b["type"] != "tool_result")
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [
            _text("[notice] the start of this conversation was left out")]})
    _mark_cache(messages)
    return messages


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _file_block(part: FilePart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image", "source": {"type": "base64", "media_type": part.ref.media_type,
                                            "data": base64.b64encode(part.data).decode()}}
    if isinstance(part, DocumentPart):
        return {"type": "document", "title": part.ref.name,
                "source": {"type": "base64", "media_type": "application/pdf",
                           "data": base64.b64encode(part.data).decode()}}
    return _text(part.text)


def _input(arguments: Any) -> dict[str, Any]:
    # The API only takes an object; keep what the model sent so it can see its mistake.
    return arguments if isinstance(arguments, dict) else {"invalid_arguments": arguments}


def _mark_cache(messages: list[dict[str, Any]]) -> None:
    """Breakpoints on the newest message and on the user turn before the newest assistant
    turn (the previous request's end, found again even when many blocks were added)."""
    marks = [len(messages) - 1] if messages else []
    last_assistant = next((i for i in range(len(messages) - 1, -1, -1)
                           if messages[i]["role"] == "assistant"), None)
    if last_assistant is not None and last_assistant > 0:
        marks.append(last_assistant - 1)
    for i in marks:
        messages[i]["content"][-1]["cache_control"] = _CACHE


def _uses_tools(messages: list[dict[str, Any]]) -> bool:
    return any(b["type"] in ("tool_use", "tool_result") for m in messages for b in m["content"])


def _placeholder_tools(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    names = dict.fromkeys(c.name for e in entries if isinstance(e, AssistantTurn)
                          for c in e.tool_calls)
    return [{"name": n, "description": "Not available on this turn.",
             "input_schema": {"type": "object"}} for n in names]


# -- responses -> ModelResponse ---------------------------------------------------------------

class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Usage(_Wire):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Block(_Wire):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None


class _Message(_Wire):
    model: str | None = None
    content: list[_Block]
    stop_reason: str | None = None
    usage: _Usage = _Usage()


class _Delta(_Wire):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _Error(_Wire):
    type: str = "error"
    message: str = ""


class _Event(_Wire):
    type: str
    message: _Message | None = None
    index: int | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: _Error | None = None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(map(str, err["loc"]))
    return f"{where}: {err['msg']}" if where else err["msg"]


def _usage(u: _Usage, into: Usage | None = None) -> Usage:
    """``u`` over ``into``: counts that are present replace the earlier ones."""
    base = into or Usage()
    return Usage(
        input_tokens=base.input_tokens if u.input_tokens is None else u.input_tokens,
        output_tokens=base.output_tokens if u.output_tokens is None else u.output_tokens,
        cache_creation_tokens=(base.cache_creation_tokens if u.cache_creation_input_tokens
                               is None else u.cache_creation_input_tokens),
        cache_read_tokens=(base.cache_read_tokens if u.cache_read_input_tokens is None
                           else u.cache_read_input_tokens))


def _finish(model: str | None, blocks: Sequence[_Block], calls: Sequence[ToolCall],
            stop_reason: str | None, usage: Usage) -> ModelResponse:
    if stop_reason == "refusal":
        raise ProviderError(f"{NAME}: the model refused to answer (stop_reason 'refusal')")
    text = "".join(b.text or "" for b in blocks if b.type == "text")
    return ModelResponse(text=text, tool_calls=tuple(calls), usage=usage, model=model,
                         stop_reason=stop_reason)


def _from_message(data: Any) -> ModelResponse:
    if isinstance(data, dict) and data.get("type") == "error":
        raise ProviderError(f"{NAME}: error in a 200 response: {data.get('error')}")
    try:
        message = _Message.model_validate(data)
    except ValidationError as exc:
        raise ProviderError(f"{NAME}: malformed response body: {_first_error(exc)}") from exc
    calls = [ToolCall(id=b.id or "", name=b.name or "",
                      arguments=b.input if b.input is not None else {})
             for b in message.content if b.type == "tool_use"]
    return _finish(message.model, message.content, calls, message.stop_reason,
                   _usage(message.usage))


class _StreamState:
    """Assembles a streamed message from its events (an ``Assembler``)."""

    end = "message_stop"

    def __init__(self) -> None:
        self.model: str | None = None
        self.blocks: dict[int, _Block] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.done = False

    def feed(self, sse: ServerSentEvent) -> str:
        """Take in one event; return the text it adds (for ``on_text``)."""
        data = parse_json(NAME, sse.data, f"{sse.event!r} event")
        try:
            event = _Event.model_validate(data)
        except ValidationError as exc:
            raise ProviderError(f"{NAME}: malformed stream event: {_first_error(exc)} "
                                f"(got {str(data)[:120]!r})") from exc
        if event.type == "message_start" and event.message is not None:
            self.model = event.message.model
            self.usage = _usage(event.message.usage)
        elif event.type == "content_block_start" and event.content_block is not None:
            self.blocks[event.index or 0] = event.content_block.model_copy()
        elif event.type == "content_block_delta" and event.delta is not None:
            block = self.blocks.get(event.index or 0)
            if block is None:
                raise ProviderError(f"{NAME}: malformed stream: a delta for block "
                                    f"{event.index} that never started")
            if event.delta.type == "text_delta" and event.delta.text:
                block.text = (block.text or "") + event.delta.text
                return event.delta.text
            if event.delta.type == "input_json_delta" and event.delta.partial_json is not None:
                self.json_parts.setdefault(event.index or 0, []).append(event.delta.partial_json)
        elif event.type == "message_delta":
            if event.delta is not None and event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            if event.usage is not None:
                self.usage = _usage(event.usage, self.usage)
        elif event.type == "message_stop":
            self.done = True
        elif event.type == "error":
            err = event.error or _Error()
            raise ProviderError(f"{NAME}: the stream reported an error: {err.type}: "
                                f"{err.message}", status=529 if err.type == "overloaded_error"
                                else None)
        return ""  # ping, content_block_stop, and event types added after this was written

    def response(self) -> ModelResponse:
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        calls = []
        for i in sorted(self.blocks):
            block = self.blocks[i]
            if block.type != "tool_use":
                continue
            parts = self.json_parts.get(i)
            arguments = tool_arguments("".join(parts)) if parts is not None else (
                block.input if block.input is not None else {})
            calls.append(ToolCall(id=block.id or "", name=block.name or "", arguments=arguments))
        return _finish(self.model, blocks, calls, self.stop_reason, self.usage)

