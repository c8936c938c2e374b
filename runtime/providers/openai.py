"""OpenAI's Chat Completions API (``POST {base_url}/chat/completions``), plain or streamed.

``base_url`` makes it speak to any compatible server: Ollama, vLLM, llama.cpp
server, LM Studio, OpenRouter. The API key is optional for servers that need none.

Usage: ``prompt_tokens`` counts cached tokens too; they are reported apart, as
``input_tokens = prompt_tokens - cached_tokens`` and ``cache_read_tokens =
cached_tokens``, so each token is priced once.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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

__all__ = ["OpenAIProvider", "to_messages"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NAME = "openai"


class OpenAIProvider:
    """Talks to an OpenAI-compatible server; streams when given an ``on_text`` sink."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        base_url: str = DEFAULT_BASE_URL,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 60.0,
        retry: Retry | None = None,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        stream: bool = True,
        seeing: Seeing | None = None,
    ) -> None:
        self.model = model
        official = urlsplit(base_url).hostname == "api.openai.com"
        self.seeing = seeing or Seeing(images=True, pdfs=official)
        """What the model is shown of files: images as such; PDFs as ``file`` parts on
        OpenAI's own API (compatible servers seldom take them: their text instead)."""
        self.max_output_tokens = max_output_tokens
        self.context_window = context_window(model, self.max_output_tokens)
        """Tokens of prompt a request may hold: the loop's default window."""
        self.temperature = temperature
        self.stream = stream
        # OpenAI's own newer models refuse "max_tokens"; many compatible servers only
        # know it.
        self._max_key = "max_completion_tokens" if official else "max_tokens"
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.transport = HttpTransport(
            NAME, base_url.rstrip("/") + "/chat/completions", headers, client=client,
            timeout_s=timeout_s, retry=retry, api_key_env=api_key_env, has_key=bool(api_key))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider made it."""
        await self.transport.aclose()

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON a request is sent as."""
        messages = to_messages(request.entries, request.files)
        if request.system:
            messages.insert(0, {"role": "system", "content": request.system})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools]
        if self.max_output_tokens is not None:
            body[self._max_key] = self.max_output_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(
        self, request: ModelRequest, on_text: TextSink | None = None
    ) -> ModelResponse:
        stream = self.stream and on_text is not None
        return await exchange(
            self.transport, self.body(request, stream=stream), on_text,
            whole=lambda content: _from_completion(parse_json(NAME, content, "response body")),
            assembler=_StreamState() if stream else None)


# -- entries -> messages --------------------------------------------------------------------

def to_messages(entries: Sequence[Entry], files: Mapping[str, FilePart] | None = None
                ) -> list[dict[str, Any]]:
    """Our history as chat messages (without the system message); a message with files
    has content parts: its text, then each file as an ``image_url``, a ``file`` or text."""
    messages: list[dict[str, Any]] = []

    def user(text: str, parts: Sequence[dict[str, Any]] = ()) -> None:
        # Adjacent user texts are joined: some chat templates insist on alternation.
        last = messages[-1] if messages and messages[-1]["role"] == "user" else None
        if not parts and last is not None and isinstance(last["content"], str):
            last["content"] += "\n\n" + text
            return
        content = [{"type": "text", "text": text}, *parts] if parts else text
        if last is None:
            messages.append({"role": "user", "content": content})
            return
        before = last["content"]
        if isinstance(before, str):
            before = [{"type": "text", "text": before}]
        last["content"] = before + (content if isinstance(content, list)
                                    else [{"type": "text", "text": content}])

    shown: list[dict[str, Any]] = []  # images of the tool results just before

    def show() -> None:
        # A tool message holds text only: the images follow the turn's results, as the
        # user's (the next message may not come between a turn's tool messages).
        if shown:
            user("[images the tools above returned]", shown.copy())
            shown.clear()

    for entry in pair_results(entries):
        if not isinstance(entry, ToolResult):
            show()
        if isinstance(entry, UserMessage):
            user(entry.text or "(files only)" if entry.files else entry.text,
                 [_file_part(part_for(f, files)) for f in entry.files])
        elif isinstance(entry, Notice):
            user(notice_text(entry))
        elif isinstance(entry, AssistantTurn):
            message: dict[str, Any] = {"role": "assistant", "content": entry.text or None}
            if entry.tool_calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
                    for c in entry.tool_calls]
            messages.append(message)
        elif isinstance(entry, ToolResult):
            messages.append({"role": "tool", "tool_call_id": entry.tool_call_id,
                             "content": result_text(entry.content)})
            shown.extend(_file_part(part_for(ref, files)) for ref in entry.images)
    show()
    return messages


def _file_part(part: FilePart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        data = base64.b64encode(part.data).decode()
        return {"type": "image_url",
                "image_url": {"url": f"data:{part.ref.media_type};base64,{data}"}}
    if isinstance(part, DocumentPart):
        data = base64.b64encode(part.data).decode()
        return {"type": "file", "file": {"filename": part.ref.name,
                                         "file_data": f"data:application/pdf;base64,{data}"}}
    return {"type": "text", "text": part.text}


def _arguments(arguments: Any) -> str:
    # A raw string is what the model sent when it was not valid JSON: send it back as is.
    return arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                   ensure_ascii=False)


# -- responses -> ModelResponse ---------------------------------------------------------------

class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Function(_Wire):
    name: str | None = None
    arguments: str | None = None


class _Call(_Wire):
    index: int | None = None
    id: str | None = None
    function: _Function = _Function()


class _Message(_Wire):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[_Call] | None = None


class _Choice(_Wire):
    message: _Message | None = None
    delta: _Message | None = None
    finish_reason: str | None = None


class _Details(_Wire):
    cached_tokens: int | None = None


class _Usage(_Wire):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _Details | None = None


class _Completion(_Wire):
    model: str | None = None
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None


def _parse(data: Any, what: str) -> _Completion:
    if isinstance(data, dict) and data.get("error") is not None:
        err = data["error"]
        message = err.get("message", err) if isinstance(err, dict) else err
        raise ProviderError(f"{NAME}: the server reported an error: {message}")
    try:
        return _Completion.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ProviderError(f"{NAME}: malformed {what}: {'.'.join(map(str, err['loc']))}: "
                            f"{err['msg']}") from exc


def _usage(u: _Usage | None) -> Usage:
    if u is None:
        return Usage()
    cached = (u.prompt_tokens_details.cached_tokens or 0) if u.prompt_tokens_details else 0
    return Usage(input_tokens=max(0, u.prompt_tokens - cached),
                 output_tokens=u.completion_tokens, cache_read_tokens=cached)


def _check_refusal(refusal: str | None, finish_reason: str | None) -> None:
    if refusal:
        raise ProviderError(f"{NAME}: the model refused to answer: {refusal}")
    if finish_reason == "content_filter":
        raise ProviderError(f"{NAME}: the answer was withheld by the content filter "
                            "(finish_reason 'content_filter')")


def _call_id(given: str | None) -> str:
    # Some compatible servers send no id; ours must be unique within the run.
    return given or f"call_{uuid.uuid4().hex[:24]}"


def _from_completion(data: Any) -> ModelResponse:
    completion = _parse(data, "response body")
    if not completion.choices or completion.choices[0].message is None:
        raise ProviderError(f"{NAME}: malformed response body: no choices[0].message")
    choice = completion.choices[0]
    message = choice.message
    assert message is not None
    _check_refusal(message.refusal, choice.finish_reason)
    calls = tuple(ToolCall(id=_call_id(c.id), name=c.function.name or "",
                           arguments=tool_arguments(c.function.arguments or ""))
                  for c in message.tool_calls or ())
    return ModelResponse(text=message.content or "", tool_calls=calls,
                         usage=_usage(completion.usage), model=completion.model,
                         stop_reason=choice.finish_reason)


@dataclass(slots=True)
class _Partial:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamState:
    """Assembles a streamed completion from its chunks (an ``Assembler``)."""

    end = "[DONE]"

    def __init__(self) -> None:
        self.done = False
        self.model: str | None = None
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _Partial] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()

    def feed(self, sse: ServerSentEvent) -> str:
        """Take in one chunk; return the text it adds (for ``on_text``)."""
        if sse.data.strip() == "[DONE]":
            self.done = True
            return ""
        chunk = _parse(parse_json(NAME, sse.data, "stream chunk"), "stream chunk")
        self.model = chunk.model or self.model
        if chunk.usage is not None:  # the last chunk, with stream_options.include_usage
            self.usage = _usage(chunk.usage)
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        delta = choice.delta or _Message()
        if delta.refusal:
            self.refusal.append(delta.refusal)
        for call in delta.tool_calls or ():
            if call.index is not None:
                index = call.index
            elif call.id is not None or not self.calls:
                index = len(self.calls)  # a server that sends no index: a new id, a new call
            else:
                index = max(self.calls)
            partial = self.calls.setdefault(index, _Partial())
            partial.id = partial.id or call.id
            partial.name = partial.name or call.function.name or ""
            if call.function.arguments:
                partial.arguments.append(call.function.arguments)
        if delta.content:
            self.text.append(delta.content)
            return delta.content
        return ""

    def response(self) -> ModelResponse:
        _check_refusal("".join(self.refusal), self.finish_reason)
        calls = tuple(ToolCall(id=_call_id(p.id), name=p.name,
                               arguments=tool_arguments("".join(p.arguments)))
                      for _, p in sorted(self.calls.items()))
        return ModelResponse(text="".join(self.text), tool_calls=calls, usage=self.usage,
                             model=self.model, stop_reason=self.finish_reason)
