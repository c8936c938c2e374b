"""The OpenAI provider against a local fake of Chat Completions, through real httpx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import (
    AgentConfig,
    AssistantTurn,
    ConfigError,
    ModelRequest,
    Notice,
    OpenAIProvider,
    ProviderConfig,
    ProviderError,
    Retry,
    RunState,
    Runtime,
    SQLiteStore,
    ToolCall,
    ToolRegistry,
    ToolResult,
    Usage,
    UserMessage,
    make_provider,
    tool,
)
from tests.fakes.openai import OpenAIServer, completion, error, stream
from tests.fakes.recorders import WEATHER, Deltas, Sleeps, ask
from tests.fakes.server import Reply, load, load_json, sse

KEY = "sk-test-key"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": WEATHER.parameters}}


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(KEY) as s:
        yield s


def make(server: OpenAIServer, client: httpx.AsyncClient, sleeps: Sleeps | None = None,
         *, max_retries: int = 3, **options: Any) -> OpenAIProvider:
    options.setdefault("api_key", KEY)
    return OpenAIProvider(
        "gpt-4.1", base_url=server.base_url, client=client,
        retry=Retry(max_retries=max_retries, sleep=Sleeps() if sleeps is None else sleeps,
                    random=lambda: 0.5), **options)


# -- plain turns and the request's shape ------------------------------------------------------

async def test_plain_turn(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("openai/completion_text.json")))
    response = await make(server, client).complete(ask(tools=[WEATHER]))
    assert response.text == "Bonjour ! Il fait beau à Paris aujourd\u2019hui."
    # prompt_tokens counts the cached ones too: they are reported apart, priced once.
    assert response.usage == Usage(input_tokens=158, output_tokens=14, cache_read_tokens=1792)
    assert (response.model, response.stop_reason) == ("gpt-4.1-2025-04-14", "stop")
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Salut"}],
        "tools": [WEATHER_TOOL],
    }


async def test_parallel_tool_calls_and_invalid_arguments(server: OpenAIServer,
                                                         client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("openai/completion_tool_calls.json")))
    response = await make(server, client).complete(ask(tools=[WEATHER]))
    assert response.text == "" and response.stop_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall(id="call_12345xyz", name="get_weather",
                 arguments={"city": "Paris", "unit": "celsius"}),
        # Unparseable JSON stays a raw string: the registry answers invalid_arguments.
        ToolCall(id="call_67890abc", name="get_weather", arguments='{"city":"Zürich"'))


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
    entries = [
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
    await make(server, client).complete(ModelRequest(system="", entries=entries))
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

@pytest.mark.parametrize("chunks", [1, 4, 9, (7, 1, 30, 2)])
async def test_streamed_parallel_tool_calls_at_awkward_boundaries(
        server: OpenAIServer, client: httpx.AsyncClient, chunks: Any) -> None:
    server.queue(Reply(sse=load("openai/stream_parallel_tool_calls.sse"), chunks=chunks))
    deltas = Deltas()
    response = await make(server, client).complete(ask(tools=[WEATHER]), deltas)
    assert deltas == [] and response.text == ""
    assert response.tool_calls == (
        ToolCall(id="call_DdmO9pD3xa9XTPNJ32zg2hcA", name="get_weather",
                 arguments={"city": "Paris", "unit": "celsius"}),
        ToolCall(id="call_ABZ4NnZMgNqVQzPSMyyYq0ZF", name="get_weather",
                 arguments={"city": "Zürich"}))
    assert response.usage == Usage(input_tokens=230, output_tokens=52, cache_read_tokens=1920)
    assert response.stop_reason == "tool_calls"
    body = server.requests[0].json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_streamed_text_split_inside_utf8_characters(server: OpenAIServer,
                                                          client: httpx.AsyncClient) -> None:
    server.queue(Reply(sse=load("openai/stream_text.sse"), chunks=1))
    deltas = Deltas()
    response = await make(server, client).complete(ask(), deltas)
    assert deltas == ["Grüße aus ", "Zürich — ", "es ist sonnig ☀️, 21 °C."]
    assert response.text == "".join(deltas) and response.stop_reason == "stop"
    assert response.usage == Usage(input_tokens=158, output_tokens=19, cache_read_tokens=1792)


async def test_streamed_invalid_tool_arguments_stay_raw(server: OpenAIServer,
                                                        client: httpx.AsyncClient) -> None:
    server.queue(stream(calls=[("call_1", "get_weather", ['{"city": "Par', 'is", '])],
                        finish_reason="length", chunks=6))
    response = await make(server, client).complete(ask(tools=[WEATHER]), Deltas())
    assert response.tool_calls == (ToolCall(id="call_1", name="get_weather",
                                            arguments='{"city": "Paris", '),)


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
    response = await make(server, client).complete(ask(tools=[WEATHER]), Deltas())
    (call,) = response.tool_calls
    assert call.name == "get_weather" and call.arguments == {"city": "Oslo"}
    assert call.id.startswith("call_") and response.usage == Usage()


async def test_keyless_local_server(client: httpx.AsyncClient) -> None:
    async with OpenAIServer(api_key=None) as local:
        local.queue(stream(["hi"]))
        response = await make(local, client, api_key=None).complete(ask(), Deltas())
    assert response.text == "hi" and "authorization" not in local.requests[0].headers


# -- failures -----------------------------------------------------------------------------------

async def test_429_with_retry_after_ms_then_success(server: OpenAIServer,
                                                    client: httpx.AsyncClient) -> None:
    sleeps = Sleeps()
    server.queue(Reply(status=429, json=load_json("openai/error_429.json"),
                       headers={"retry-after-ms": "576", "retry-after": "1"}),
                 Reply(status=503, body=b"upstream connect error", headers={"retry-after": "0"}),
                 stream(["ok"]))
    response = await make(server, client, sleeps).complete(ask(), Deltas())
    assert response.text == "ok" and sleeps == [0.576, 0.0]


async def test_other_4xx_are_not_retried(server: OpenAIServer,
                                         client: httpx.AsyncClient) -> None:
    sleeps = Sleeps()
    server.queue(error(400, "Invalid schema for function 'get_weather': 'object' is not valid",
                       code="invalid_function_parameters"))
    with pytest.raises(ProviderError, match=r"HTTP 400\): invalid_request_error: Invalid schema"):
        await make(server, client, sleeps).complete(ask(tools=[WEATHER]), Deltas())
    assert sleeps == [] and len(server.requests) == 1


async def test_500_every_time_fails_after_the_retries(server: OpenAIServer,
                                                      client: httpx.AsyncClient) -> None:
    sleeps = Sleeps()
    server.queue(*[Reply(status=500, json=load_json("openai/error_500.json"))] * 4)
    with pytest.raises(ProviderError, match=r"HTTP 500\) after 4 attempt\(s\): server_error: "
                       r"The server had an error") as caught:
        await make(server, client, sleeps).complete(ask(), Deltas())
    assert caught.value.status == 500 and len(server.requests) == 4
    assert sleeps == [0.375, 0.75, 1.5]


@pytest.mark.parametrize(("key", "expected"), [
    ("sk-wrong", r"API key was rejected \(HTTP 401\).*missing or wrong.*\$OPENAI_API_KEY.*"
                 r"Incorrect API key"),
    (None, r"no API key was sent \(HTTP 401\).*\$OPENAI_API_KEY"),
])
async def test_401_names_the_key_variable(server: OpenAIServer, client: httpx.AsyncClient,
                                          key: str | None, expected: str) -> None:
    with pytest.raises(ProviderError, match=expected) as caught:
        await make(server, client, api_key=key).complete(ask())
    assert caught.value.status == 401 and len(server.requests) == 1


async def test_stream_cut_mid_way(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hello", " wor"], done=False, end="abort", chunks=13))
    deltas = Deltas()
    with pytest.raises(ProviderError, match="stream broke off mid-answer"):
        await make(server, client).complete(ask(), deltas)
    assert deltas == ["Hello", " wor"]


async def test_stream_without_done(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hello"], done=False))
    with pytest.raises(ProviderError, match=r"ended before \[DONE\]"):
        await make(server, client).complete(ask(), Deltas())


async def test_error_chunk_mid_stream(server: OpenAIServer, client: httpx.AsyncClient) -> None:
    head = stream(["Hel"], done=False).sse or b""
    server.queue(Reply(sse=head + sse([(None, {"error": {
        "message": "The server had an error while processing your request.",
        "type": "server_error"}})])))
    with pytest.raises(ProviderError, match="reported an error: The server had an error"):
        await make(server, client).complete(ask(), Deltas())


@pytest.mark.parametrize(("reply", "expected"), [
    (Reply(body=b'{"id": "chatcmpl-1", "choi'), "malformed response body"),
    (Reply(body=b"<html>502 Bad Gateway</html>"), "malformed response body"),
    (Reply(json={"id": "chatcmpl-1", "choices": []}), "no choices"),
    (Reply(json=load_json("openai/completion_refusal.json")),
     "refused to answer: I'm sorry, I can't help"),
    (completion("", finish_reason="content_filter"), "content filter"),
])
async def test_bad_plain_bodies(server: OpenAIServer, client: httpx.AsyncClient,
                                reply: Reply, expected: str) -> None:
    server.queue(reply)
    with pytest.raises(ProviderError, match=expected):
        await make(server, client).complete(ask())


async def test_malformed_chunk_and_streamed_refusal(server: OpenAIServer,
                                                    client: httpx.AsyncClient) -> None:
    refusal = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"refusal": "I can't."}, "finish_reason": None}]}
    server.queue(Reply(sse=b'data: {"id": "chatcmpl-1", "choices": [\n\n'),
                 Reply(sse=sse([(None, refusal), (None, "[DONE]")])))
    with pytest.raises(ProviderError, match="malformed stream chunk"):
        await make(server, client).complete(ask(), Deltas())
    with pytest.raises(ProviderError, match=r"refused to answer: I can't\."):
        await make(server, client).complete(ask(), Deltas())


async def test_cancellation_mid_stream_closes_the_connection(
        server: OpenAIServer, client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hel", "lo"], done=False, end="hang"))
    deltas = Deltas()
    task = asyncio.create_task(make(server, client).complete(ask(), deltas))
    await deltas.first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(server.disconnected.wait(), 5)


# -- configuration ------------------------------------------------------------------------------

def test_make_provider_key_is_optional_only_with_a_custom_base_url(tmp_path: Path) -> None:
    cfg = ProviderConfig(kind="openai", model="gpt-4.1-mini")
    with pytest.raises(ConfigError, match=r"provider\.api_key_env: .*OPENAI_API_KEY is not set"):
        make_provider(cfg, tmp_path, env={})
    provider = make_provider(cfg, tmp_path, env={"OPENAI_API_KEY": "sk-1"})
    assert isinstance(provider, OpenAIProvider)
    assert provider.transport.url == "https://api.openai.com/v1/chat/completions"
    assert provider.transport.headers == {"authorization": "Bearer sk-1"}
    local = make_provider(cfg.model_copy(update={"base_url": "http://localhost:11434/v1/"}),
                          tmp_path, env={})
    assert isinstance(local, OpenAIProvider) and local.transport.headers == {}
    assert local.transport.url == "http://localhost:11434/v1/chat/completions"
    with pytest.raises(ConfigError, match=r"provider\.model: .*needs a model"):
        make_provider(ProviderConfig(kind="openai", base_url="http://h/v1"), tmp_path, env={})


# -- end to end ---------------------------------------------------------------------------------

async def test_runtime_round_trip_with_a_tool(server: OpenAIServer, client: httpx.AsyncClient,
                                              tmp_path: Path) -> None:
    @tool
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp": 21, "unit": unit}

    server.queue(
        stream(calls=[("call_1", "get_weather", ['{"ci', 'ty": "Paris"}']),
                      ("call_2", "get_weather", ['{"city": 5}'])], usage=(800, 30, 0), chunks=7),
        stream(["It is 21 °C in Paris."], usage=(900, 10, 768), chunks=(2, 11)))
    async with SQLiteStore(tmp_path / "maiden.db") as store, Runtime(
            store, make(server, client), ToolRegistry([get_weather]),
            agent=AgentConfig(system_prompt="You are a weather bot.")) as rt:
        run = await rt.send("t1", "Weather in Paris?")
        entries = await store.load_entries("t1")
    assert run.state is RunState.COMPLETED and run.reply == "It is 21 °C in Paris."
    assert [e.kind for e in entries] == ["user", "assistant", "tool_result", "tool_result",
                                         "assistant"]
    assert run.usage == Usage(input_tokens=932, output_tokens=40, cache_read_tokens=768)
    second = server.requests[1].json["messages"]
    assert second[0] == {"role": "system", "content": "You are a weather bot."}
    assert second[-2] == {"role": "tool", "tool_call_id": "call_1",
                          "content": '{"city": "Paris", "temp": 21, "unit": "celsius"}'}
    assert second[-1]["tool_call_id"] == "call_2"
    assert '"invalid_arguments"' in second[-1]["content"]
