"""What only the OpenAI provider does, against a local fake of Chat Completions: the
request's shape, the output token limit's key, usage asked for in streams, servers without
ids or keys, retry-after-ms, streamed refusals. What every provider does is in
test_contract.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from runtime import (
    AssistantTurn,
    ConfigError,
    Entry,
    ModelRequest,
    Notice,
    ProviderConfig,
    ProviderError,
    ToolResult,
    Usage,
    UserMessage,
    make_provider,
)
from runtime.model.entries import ToolCall
from runtime.providers.openai import OpenAIProvider
from tests.fakes.openai import OpenAIServer, completion, stream
from tests.fakes.recorders import WEATHER, Deltas, Sleeps, ask
from tests.fakes.server import Reply, load_json, sse
from tests.fakes.vendors import OPENAI

KEY = OPENAI.key
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": WEATHER.parameters}}


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(KEY) as s:
        yield s


# -- plain turns and the request's shape ------------------------------------------------------

async def test_plain_request(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("openai/completion_text.json")))
    await OPENAI.provider(server, client).complete(ask(tools=[WEATHER]))
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Salut"}],
        "tools": [WEATHER_TOOL],
    }


def test_output_token_limit_key_and_temperature() -> None:
    request = ask()
    official = OpenAIProvider("gpt-4.1", api_key="k", max_output_tokens=500, temperature=0)
    assert official.body(request, stream=False)["max_completion_tokens"] == 500
    local = OpenAIProvider("llama3.1", base_url="http://localhost:11434/v1",
                           max_output_tokens=500, temperature=0.7)
    body = local.body(request, stream=True)
    assert (body["max_tokens"], body["temperature"]) == (500, 0.7)
    assert body["stream_options"] == {"include_usage": True}
    assert local.transport.url == "http://localhost:11434/v1/chat/completions"


async def test_history_becomes_valid_messages(server: OpenAIServer,
                                              client: httpx.AsyncClient) -> None:
    entries: list[Entry] = [
        UserMessage(run_id="r1", text="Weather in Paris and Zürich?"),
        AssistantTurn(run_id="r1", text="Checking.", tool_calls=(
            ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="c2", name="get_weather", arguments='{"city": Zürich'))),
        ToolResult(run_id="r1", tool_call_id="c1", name="get_weather", content={"temp": 21}),
        ToolResult(run_id="r1", tool_call_id="c2", name="get_weather", is_error=True,
                   content={"error": {"type": "invalid_arguments", "message": "bad JSON"}}),
        Notice(run_id="r1", code="final_turn", text="Answer now."),
        AssistantTurn(run_id="r1"),
        UserMessage(run_id="r2", text="And Lyon?"),
    ]
    server.queue(completion("Paris 21 °C."))
    await OPENAI.provider(server, client).complete(ModelRequest(system="", entries=entries))
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": "Weather in Paris and Zürich?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": Zürich'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'},
        {"role": "tool", "tool_call_id": "c2",
         "content": '{"error": {"type": "invalid_arguments", "message": "bad JSON"}}'},
        {"role": "user", "content": "[notice] Answer now.\n\nAnd Lyon?"},
    ]
    assert "tools" not in server.requests[0].json


# -- streaming ----------------------------------------------------------------------------------

async def test_streamed_request_asks_for_usage(server: OpenAIServer,
                                              client: httpx.AsyncClient) -> None:
    server.queue(stream(["hi"]))
    await OPENAI.provider(server, client).complete(ask(), Deltas())
    body = server.requests[0].json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_compatible_servers_without_ids_or_indexes(server: OpenAIServer,
                                                         client: httpx.AsyncClient) -> None:
    # Like some local servers: whole calls in one chunk, no index, no id.
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "llama3.1",
             "choices": [{"index": 0, "finish_reason": None, "delta": {"role": "assistant",
                          "content": None, "tool_calls": [
                              {"type": "function", "function": {
                                  "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}}]}
    done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    server.queue(Reply(sse=sse([(None, chunk), (None, done), (None, "[DONE]")])))
    response = await OPENAI.provider(server, client).complete(ask(tools=[WEATHER]), Deltas())
    (call,) = response.tool_calls
    assert call.name == "get_weather" and call.arguments == {"city": "Oslo"}
    assert call.id.startswith("call_") and response.usage == Usage()


async def test_keyless_local_server(client: httpx.AsyncClient) -> None:
    async with OpenAIServer(api_key=None) as local:
        local.queue(stream(["hi"]))
        response = await OPENAI.provider(local, client, api_key=None).complete(ask(), Deltas())
    assert response.text == "hi" and "authorization" not in local.requests[0].headers


# -- failures -----------------------------------------------------------------------------------

async def test_retry_after_ms_wins_over_retry_after(server: OpenAIServer,
                                                    client: httpx.AsyncClient) -> None:
    sleeps = Sleeps()
    server.queue(Reply(status=429, json=load_json("openai/error_429.json"),
                       headers={"retry-after-ms": "576", "retry-after": "1"}),
                 stream(["ok"]))
    response = await OPENAI.provider(server, client, sleeps).complete(ask(), Deltas())
    assert response.text == "ok" and sleeps == [0.576]


async def test_a_retry_is_an_event_of_the_traced_model_call(
        server: OpenAIServer, client: httpx.AsyncClient) -> None:
    """Traced ([otel]): the request sent again after a 429 is a ``retry`` event of its
    model call's span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from runtime.engine.tracing import OtelTracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server.queue(Reply(status=429, json=load_json("openai/error_429.json"),
                       headers={"retry-after-ms": "5"}), stream(["ok"]))
    with OtelTracing(provider).model("gpt-4.1"):
        await OPENAI.provider(server, client, Sleeps()).complete(ask(), Deltas())
    (span,) = exporter.get_finished_spans()
    (event,) = span.events
    assert event.name == "retry" and dict(event.attributes or {})["maiden.retry.attempt"] == 1
    assert "429" in str(dict(event.attributes or {})["maiden.reason"])
    provider.shutdown()


async def test_streamed_refusal(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    refusal = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"refusal": "I can't."}, "finish_reason": None}]}
    server.queue(Reply(sse=sse([(None, refusal), (None, "[DONE]")])))
    with pytest.raises(ProviderError, match=r"refused to answer: I can't\."):
        await OPENAI.provider(server, client).complete(ask(), Deltas())


# -- configuration ------------------------------------------------------------------------------

def test_make_provider_key_is_optional_only_with_a_custom_base_url(tmp_path: Path) -> None:
    cfg = ProviderConfig(kind="openai", model="gpt-4.1-mini")
    provider = make_provider(cfg, tmp_path, env={"OPENAI_API_KEY": "sk-1"})
    assert isinstance(provider, OpenAIProvider)
    assert provider.transport.headers == {"authorization": "Bearer sk-1"}
    local = make_provider(cfg.model_copy(update={"base_url": "http://localhost:11434/v1/"}),
                          tmp_path, env={})
    assert isinstance(local, OpenAIProvider) and local.transport.headers == {}
    assert local.transport.url == "http://localhost:11434/v1/chat/completions"
    with pytest.raises(ConfigError, match=r"provider\.model: .*needs a model"):
        make_provider(ProviderConfig(kind="openai", base_url="http://h/v1"), tmp_path, env={})
