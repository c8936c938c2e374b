"""Each model vendor as the provider contract suite (tests/runtime/providers/test_contract.py)
sees it.

A ``Vendor`` knows how to start its fake server and build its provider against it, how
to write a reply in its wire format and read back what a request sent, and what its
recorded payloads in tests/data must parse to. The contract tests are written once
against this interface; a new HTTP provider joins them by adding one ``Vendor`` here.
Vendor-specific behaviour (request shapes, prompt caching, ...) stays in that vendor's
own test module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from runtime import ModelResponse, Usage
from runtime.engine.tracing import note_retry
from runtime.model.entries import ToolCall
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.http import Retry
from runtime.providers.openai import OpenAIProvider

from . import anthropic, openai
from .recorders import Sleeps
from .server import End, FakeServer, Reply, load, load_json, sse

__all__ = ["ANTHROPIC", "OPENAI", "VENDORS", "Failure", "Recorded", "Vendor"]

Calls = Sequence[tuple[str, str, Sequence[str]]]
"""Streamed tool calls: ``(id, name, argument JSON fragments)``."""

BONJOUR = "Bonjour ! Il fait beau à Paris aujourd\u2019hui."
GRUESSE = ("Grüße aus ", "Zürich — ", "es ist sonnig ☀️, 21 °C.")


@dataclass(frozen=True)
class Recorded:
    """A payload recorded from the vendor's API and the response it must parse to."""

    path: str
    response: ModelResponse
    deltas: tuple[str, ...] = ()
    """The text deltas, as an event stream sends them."""


@dataclass(frozen=True)
class Failure:
    """A reply the vendor's API can give and what the ``ProviderError`` must say (a regex)."""

    reply: Reply
    says: str
    status: int | None = None


class Vendor(ABC):
    name: Literal["anthropic", "openai"]
    key: str
    """The key its fake server accepts."""
    key_env: str
    """The variable the key is read from by default."""
    url: str
    """The real API's endpoint, where ``make_provider`` points by default."""
    model: str
    provider_class: type[AnthropicProvider] | type[OpenAIProvider]

    # What its recordings in tests/data hold.
    plain: Recorded
    plain_tools: Recorded
    text_stream: Recorded
    tools_stream: Recorded
    rate_limited: str
    """A recorded 429 body."""
    server_error: Failure
    """A recorded 500; ``says`` is the detail after the status."""
    bad_request: Failure
    """A 400, which is not retried."""

    # How its wire format goes wrong.
    bad_bodies: dict[str, Failure]
    """Plain replies that fail (beyond unparseable JSON, which fails for every vendor)."""
    error_mid_stream: Failure
    malformed_event: Failure
    ended_early: str
    """What a stream that stops without its end marker fails with."""
    out_of_tokens: str
    """The stop reason when the output token limit cuts the answer off."""
    wrong_key_says: str
    """The server's words for a wrong key."""

    def __repr__(self) -> str:
        return self.name

    @abstractmethod
    def server(self) -> FakeServer:
        """Its fake server (not started), accepting ``key``."""

    def provider(self, server: FakeServer, client: httpx.AsyncClient,
                 sleeps: Sleeps | None = None, *, max_retries: int = 3,
                 **options: Any) -> AnthropicProvider | OpenAIProvider:
        """Its provider pointed at ``server``, sleeping into ``sleeps`` between retries."""
        options.setdefault("api_key", self.key)
        return self.provider_class(
            self.model, base_url=server.base_url, client=client,
            retry=Retry(max_retries=max_retries, sleep=Sleeps() if sleeps is None else sleeps,
                        random=lambda: 0.5, noted=note_retry), **options)

    @abstractmethod
    def reply(self, text: str) -> Reply:
        """A plain (not streamed) text reply."""

    @abstractmethod
    def stream(self, text: Sequence[str] = (), calls: Calls = (), *, usage: Usage | None = None,
               stop_reason: str | None = None, complete: bool = True,
               chunks: int | Sequence[int] = 0, end: End = "eof") -> Reply:
        """A streamed reply: text deltas, then tool calls. ``complete=False`` leaves out
        the end of the stream (and its usage)."""

    @abstractmethod
    def tool_results(self, body: Any) -> dict[str, str]:
        """The tool results a request sent back, by call id, in order."""

    @abstractmethod
    def system_prompt(self, body: Any) -> str:
        """The system prompt a request sent."""


class Anthropic(Vendor):
    name = "anthropic"
    key = "sk-ant-test-key"
    key_env = "ANTHROPIC_API_KEY"
    url = "https://api.anthropic.com/v1/messages"
    model = "claude-sonnet-4-5"
    provider_class = AnthropicProvider

    plain = Recorded("anthropic/message_text.json", ModelResponse(
        text=BONJOUR, usage=Usage(input_tokens=21, output_tokens=17,
                                  cache_creation_tokens=1536, cache_read_tokens=0),
        model="claude-sonnet-4-5-20250929", stop_reason="end_turn"))
    plain_tools = Recorded("anthropic/message_tool_use.json", ModelResponse(
        text="I'll look up the current weather in Paris.",
        tool_calls=(ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="get_weather",
                             arguments={"city": "Paris", "unit": "celsius"}),),
        usage=Usage(input_tokens=384, output_tokens=71, cache_read_tokens=1536),
        model="claude-sonnet-4-5-20250929", stop_reason="tool_use"))
    text_stream = Recorded("anthropic/stream_text.sse", ModelResponse(
        text="".join(GRUESSE),
        usage=Usage(input_tokens=12, output_tokens=19, cache_read_tokens=1536),
        model="claude-sonnet-4-5-20250929", stop_reason="end_turn"), deltas=GRUESSE)
    tools_stream = Recorded("anthropic/stream_parallel_tools.sse", ModelResponse(
        text="I'll check both cities at once.",
        tool_calls=(ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather",
                             arguments={"city": "Paris", "unit": "celsius"}),
                    ToolCall(id="toolu_01CgHPXMs4hWmGSUBrgumwtu", name="get_weather",
                             arguments={"city": "Zürich"})),
        usage=Usage(input_tokens=472, output_tokens=89, cache_creation_tokens=312,
                    cache_read_tokens=2048),
        model="claude-sonnet-4-5-20250929", stop_reason="tool_use"),
        deltas=("I'll check both cities", " at once."))
    rate_limited = "anthropic/error_429.json"
    server_error = Failure(Reply(status=500, json=load_json("anthropic/error_500.json")),
                           "api_error: Internal server error")
    bad_request = Failure(Reply(status=400, json=load_json("anthropic/error_400.json")),
                          r"HTTP 400\).*max_tokens: 100000 > 64000")

    bad_bodies = {
        "wrong-shape": Failure(Reply(json={"type": "message", "content": "nope"}),
                               "malformed response body: content"),
        "refusal": Failure(Reply(json=load_json("anthropic/message_refusal.json")),
                           "refused to answer"),
    }
    error_mid_stream = Failure(Reply(sse=load("anthropic/stream_overloaded.sse"), chunks=11),
                               "overloaded_error: Overloaded", status=529)
    malformed_event = Failure(
        Reply(sse=b'event: message_start\ndata: {"type": "message_start", "mess\n\n'),
        "malformed 'message_start' event")
    ended_early = "ended before message_stop"
    out_of_tokens = "max_tokens"
    wrong_key_says = "invalid x-api-key"

    def server(self) -> FakeServer:
        return anthropic.AnthropicServer(self.key)

    def reply(self, text: str) -> Reply:
        return anthropic.message(text)

    def stream(self, text: Sequence[str] = (), calls: Calls = (), *, usage: Usage | None = None,
               stop_reason: str | None = None, complete: bool = True,
               chunks: int | Sequence[int] = 0, end: End = "eof") -> Reply:
        u = usage or Usage(input_tokens=50, output_tokens=10)
        return anthropic.stream(
            text, calls, stop_reason=stop_reason, complete=complete, chunks=chunks, end=end,
            usage=(u.input_tokens, u.output_tokens, u.cache_creation_tokens,
                   u.cache_read_tokens))

    def tool_results(self, body: Any) -> dict[str, str]:
        return {b["tool_use_id"]: b["content"] for m in body["messages"] if m["role"] == "user"
                for b in m["content"] if b["type"] == "tool_result"}

    def system_prompt(self, body: Any) -> str:
        return "".join(b["text"] for b in body.get("system", []))


class OpenAI(Vendor):
    name = "openai"
    key = "sk-test-key"
    key_env = "OPENAI_API_KEY"
    url = "https://api.openai.com/v1/chat/completions"
    model = "gpt-4.1"
    provider_class = OpenAIProvider

    # prompt_tokens counts the cached ones too: they are reported apart, priced once.
    plain = Recorded("openai/completion_text.json", ModelResponse(
        text=BONJOUR, usage=Usage(input_tokens=158, output_tokens=14, cache_read_tokens=1792),
        model="gpt-4.1-2025-04-14", stop_reason="stop"))
    plain_tools = Recorded("openai/completion_tool_calls.json", ModelResponse(
        tool_calls=(ToolCall(id="call_12345xyz", name="get_weather",
                             arguments={"city": "Paris", "unit": "celsius"}),
                    # Unparseable JSON stays a raw string: the registry answers
                    # invalid_arguments.
                    ToolCall(id="call_67890abc", name="get_weather",
                             arguments='{"city":"Zürich"')),
        usage=Usage(input_tokens=82, output_tokens=51),
        model="gpt-4.1-2025-04-14", stop_reason="tool_calls"))
    text_stream = Recorded("openai/stream_text.sse", ModelResponse(
        text="".join(GRUESSE),
        usage=Usage(input_tokens=158, output_tokens=19, cache_read_tokens=1792),
        model="gpt-4.1-2025-04-14", stop_reason="stop"), deltas=GRUESSE)
    tools_stream = Recorded("openai/stream_parallel_tool_calls.sse", ModelResponse(
        tool_calls=(ToolCall(id="call_DdmO9pD3xa9XTPNJ32zg2hcA", name="get_weather",
                             arguments={"city": "Paris", "unit": "celsius"}),
                    ToolCall(id="call_ABZ4NnZMgNqVQzPSMyyYq0ZF", name="get_weather",
                             arguments={"city": "Zürich"})),
        usage=Usage(input_tokens=230, output_tokens=52, cache_read_tokens=1920),
        model="gpt-4.1-2025-04-14", stop_reason="tool_calls"))
    rate_limited = "openai/error_429.json"
    server_error = Failure(Reply(status=500, json=load_json("openai/error_500.json")),
                           "server_error: The server had an error")
    bad_request = Failure(
        openai.error(400, "Invalid schema for function 'get_weather': 'object' is not valid",
                     code="invalid_function_parameters"),
        r"HTTP 400\): invalid_request_error: Invalid schema")

    bad_bodies = {
        "no-choices": Failure(Reply(json={"id": "chatcmpl-1", "choices": []}), "no choices"),
        "refusal": Failure(Reply(json=load_json("openai/completion_refusal.json")),
                           "refused to answer: I'm sorry, I can't help"),
        "content-filter": Failure(openai.completion("", finish_reason="content_filter"),
                                  "content filter"),
    }
    error_mid_stream = Failure(
        Reply(sse=(openai.stream(["Hel"], done=False).sse or b"") + sse([(None, {"error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error"}})])),
        "reported an error: The server had an error")
    malformed_event = Failure(Reply(sse=b'data: {"id": "chatcmpl-1", "choices": [\n\n'),
                              "malformed stream chunk")
    ended_early = r"ended before \[DONE\]"
    out_of_tokens = "length"
    wrong_key_says = "Incorrect API key"

    def server(self) -> FakeServer:
        return openai.OpenAIServer(self.key)

    def reply(self, text: str) -> Reply:
        return openai.completion(text)

    def stream(self, text: Sequence[str] = (), calls: Calls = (), *, usage: Usage | None = None,
               stop_reason: str | None = None, complete: bool = True,
               chunks: int | Sequence[int] = 0, end: End = "eof") -> Reply:
        u = usage or Usage(input_tokens=50, output_tokens=10)
        assert not u.cache_creation_tokens, "OpenAI reports no cache writes"
        return openai.stream(
            text, calls, finish_reason=stop_reason, done=complete, chunks=chunks, end=end,
            usage=(u.input_tokens + u.cache_read_tokens, u.output_tokens, u.cache_read_tokens))

    def tool_results(self, body: Any) -> dict[str, str]:
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}

    def system_prompt(self, body: Any) -> str:
        first = body["messages"][0]
        return str(first["content"]) if first["role"] == "system" else ""


ANTHROPIC = Anthropic()
OPENAI = OpenAI()
VENDORS: tuple[Vendor, ...] = (ANTHROPIC, OPENAI)
