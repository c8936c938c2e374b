"""The Anthropic provider against a local fake of the Messages API, through real httpx."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import (
    AgentConfig,
    AnthropicProvider,
    AssistantTurn,
    ConfigError,
    ModelRequest,
    Notice,
    ProviderConfig,
    ProviderError,
    Retry,
    RunEnded,
    RunState,
    Runtime,
    SQLiteStore,
    TextDelta,
    ToolCall,
    ToolRegistry,
    ToolResult,
    Usage,
    UserMessage,
    make_provider,
    tool,
)
from runtime.providers.anthropic import to_messages
from tests.fakes.anthropic import AnthropicServer, error, message, stream
from tests.fakes.recorders import WEATHER, Deltas, Sleeps, ask
from tests.fakes.server import Reply, load, load_json

KEY = "sk-ant-test-key"
CACHE = {"type": "ephemeral"}


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(KEY) as s:
        yield s


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make(server: AnthropicServer, client: httpx.AsyncClient, sleeps: Sleeps | None = None,
         *, max_retries: int = 3, **options: Any) -> AnthropicProvider:
    options.setdefault("api_key", KEY)
    return AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.base_url, client=client,
        retry=Retry(max_retries=max_retries, sleep=Sleeps() if sleeps is None else sleeps,
                    random=lambda: 0.5), **options)


# -- plain turns and the request's shape ------------------------------------------------------

async def test_plain_turn(server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("anthropic/message_text.json")))
    response = await make(server, client).complete(ask(tools=[WEATHER]))
    assert response.text == "Bonjour ! Il fait beau à Paris aujourd\u2019hui."
    assert response.tool_calls == ()
    assert response.usage == Usage(input_tokens=21, output_tokens=17,
                                   cache_creation_tokens=1536, cache_read_tokens=0)
    assert (response.model, response.stop_reason) == ("claude-sonnet-4-5-20250929", "end_turn")
    sent = server.requests[0]
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json == {
        "model": "claude-sonnet-4-5", "max_tokens": 4096,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": CACHE}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Salut", "cache_control": CACHE}]}],
        "tools": [{"name": "get_weather", "description": "The weather in a city.",
                   "input_schema": WEATHER.parameters}],
    }


async def test_tool_use_response_and_options(server: AnthropicServer,
                                             client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("anthropic/message_tool_use.json")))
    provider = make(server, client, max_output_tokens=1000, temperature=0.2)
    response = await provider.complete(ask(tools=[WEATHER]))
    assert response.text == "I'll look up the current weather in Paris."
    assert response.tool_calls == (ToolCall(id="toolu_01A09q90qw90lq917835lq9",
                                            name="get_weather",
                                            arguments={"city": "Paris", "unit": "celsius"}),)
    assert response.usage.cache_read_tokens == 1536 and response.stop_reason == "tool_use"
    body = server.requests[0].json
    assert (body["max_tokens"], body["temperature"]) == (1000, 0.2)


def history() -> list[Any]:
    return [
        UserMessage(run_id="r1", text="Weather in Paris and Zürich?"),
        AssistantTurn(run_id="r1", text="Checking.", tool_calls=(
            ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="c2", name="get_weather", arguments={"city": "Zürich"}))),
        ToolResult(run_id="r1", tool_call_id="c1", name="get_weather", content={"temp": 21}),
        ToolResult(run_id="r1", tool_call_id="c2", name="get_weather", is_error=True,
                   content={"error": {"type": "timeout", "message": "slow"}}),
        Notice(run_id="r1", code="final_turn", text="Answer now."),
    ]


async def test_history_becomes_valid_messages(server: AnthropicServer,
                                              client: httpx.AsyncClient) -> None:
    server.queue(message("Paris 21 °C; Zürich unknown."))
    request = ModelRequest(system="Be brief.", entries=history(), tools=[WEATHER])
    await make(server, client).complete(request)
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Zürich?",
                                      "cache_control": CACHE}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {"city": "Zürich"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": '{"temp": 21}'},
            {"type": "tool_result", "tool_use_id": "c2", "is_error": True,
             "content": '{"error": {"type": "timeout", "message": "slow"}}'},
            {"type": "text", "text": "[notice] Answer now.", "cache_control": CACHE},
        ]},
    ]


async def test_final_turn_without_tools_still_valid(server: AnthropicServer,
                                                    client: httpx.AsyncClient) -> None:
    # The API refuses tool blocks when no tools are defined: placeholders + tool_choice none.
    server.queue(message("Done."))
    response = await make(server, client).complete(
        ModelRequest(system="", entries=history(), tools=(), final_turn=True))
    assert response.text == "Done."
    body = server.requests[0].json
    assert body["tool_choice"] == {"type": "none"} and "system" not in body
    assert body["tools"] == [{"name": "get_weather", "description": "Not available on this turn.",
                              "input_schema": {"type": "object"}, "cache_control": CACHE}]


async def test_untidy_histories_still_make_valid_requests(server: AnthropicServer,
                                                          client: httpx.AsyncClient) -> None:
    entries = [
        AssistantTurn(run_id="r0", text="(older answer)"),
        ToolResult(run_id="r0", tool_call_id="gone", name="clock", content="12:00"),
        UserMessage(run_id="r1", text=""),
        AssistantTurn(run_id="r1"),
        AssistantTurn(run_id="r1", tool_calls=(
            ToolCall(id="c1", name="get_weather", arguments='{"city": Paris'),
            ToolCall(id="c2", name="get_weather", arguments={"city": "Lyon"}))),
        Notice(run_id="r1", code="x", text="between a call and its result"),
        ToolResult(run_id="r1", tool_call_id="c1", name="get_weather", is_error=True,
                   content={"error": {"type": "invalid_arguments", "message": "bad JSON"}}),
    ]
    server.queue(message("ok"))
    await make(server, client).complete(ModelRequest(system="s", entries=entries,
                                                     tools=[WEATHER]))
    messages = server.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"][0]["text"] == "(older answer)"
    assert "an earlier call to clock returned: 12:00" in messages[2]["content"][0]["text"]
    assert messages[3]["content"][0]["input"] == {"invalid_arguments": '{"city": Paris'}
    last = messages[4]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[1]["tool_use_id"] == "c2" and last[1]["is_error"] is True


def test_cache_breakpoints_on_the_newest_message_and_the_previous_user_turn() -> None:
    messages = to_messages([*history()[:4], AssistantTurn(run_id="r1", text="Paris is warm.")])
    marked = [(i, j) for i, m in enumerate(messages) for j, b in enumerate(m["content"])
              if "cache_control" in b]
    assert marked == [(2, 1), (3, 0)]


# -- streaming ----------------------------------------------------------------------------------

@pytest.mark.parametrize("chunks", [1, 3, 7, (5, 1, 2, 13, 64)])
async def test_streamed_parallel_tool_calls_at_awkward_boundaries(
        server: AnthropicServer, client: httpx.AsyncClient, chunks: Any) -> None:
    server.queue(Reply(sse=load("anthropic/stream_parallel_tools.sse"), chunks=chunks))
    deltas = Deltas()
    response = await make(server, client).complete(ask(tools=[WEATHER]), deltas)
    assert deltas == ["I'll check both cities", " at once."]
    assert response.text == "I'll check both cities at once."
    assert response.tool_calls == (
        ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather",
                 arguments={"city": "Paris", "unit": "celsius"}),
        ToolCall(id="toolu_01CgHPXMs4hWmGSUBrgumwtu", name="get_weather",
                 arguments={"city": "Zürich"}))
    assert response.usage == Usage(input_tokens=472, output_tokens=89,
                                   cache_creation_tokens=312, cache_read_tokens=2048)
    assert response.stop_reason == "tool_use"
    sent = server.requests[0]
    assert sent.json["stream"] is True and sent.headers["accept"] == "text/event-stream"


async def test_streamed_text_split_inside_utf8_characters(server: AnthropicServer,
                                                          client: httpx.AsyncClient) -> None:
    server.queue(Reply(sse=load("anthropic/stream_text.sse"), chunks=1))
    deltas = Deltas()
    response = await make(server, client).complete(ask(), deltas)
    assert deltas == ["Grüße aus ", "Zürich — ", "es ist sonnig ☀️, 21 °C."]
    assert response.text == "".join(deltas) and response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=12, output_tokens=19, cache_read_tokens=1536)


async def test_no_streaming_without_a_sink_or_when_disabled(server: AnthropicServer,
                                                            client: httpx.AsyncClient) -> None:
    server.queue(message("a"), message("b"))
    assert (await make(server, client).complete(ask())).text == "a"
    assert (await make(server, client, stream=False).complete(ask(), Deltas())).text == "b"
    assert all("stream" not in r.json for r in server.requests)


async def test_invalid_tool_argument_json_is_kept_raw(server: AnthropicServer,
                                                      client: httpx.AsyncClient) -> None:
    server.queue(stream(calls=[("toolu_1", "get_weather", ['{"city": "Par', 'is", "unit": '])],
                        stop_reason="max_tokens", chunks=4))
    response = await make(server, client).complete(ask(tools=[WEATHER]), Deltas())
    assert response.tool_calls == (ToolCall(id="toolu_1", name="get_weather",
                                            arguments='{"city": "Paris", "unit": '),)


# -- failures -----------------------------------------------------------------------------------

async def test_429_with_retry_after_then_success(server: AnthropicServer,
                                                 client: httpx.AsyncClient,
                                                 sleeps: Sleeps) -> None:
    server.queue(error(429, "rate_limit_error", "slow down", **{"retry-after": "2"}),
                 error(529, "overloaded_error", "Overloaded", **{"retry-after-ms": "1500"}),
                 stream(["fine"]))
    response = await make(server, client, sleeps).complete(ask(), Deltas())
    assert response.text == "fine"
    assert sleeps == [2.0, 1.5] and len(server.requests) == 3


async def test_500_every_time_fails_after_the_retries(server: AnthropicServer,
                                                      client: httpx.AsyncClient,
                                                      sleeps: Sleeps) -> None:
    server.queue(*[Reply(status=500, json=load_json("anthropic/error_500.json"))] * 3)
    with pytest.raises(ProviderError, match=r"server error \(HTTP 500\) after 3 attempt\(s\): "
                       r"api_error: Internal server error") as caught:
        await make(server, client, sleeps, max_retries=2).complete(ask())
    assert caught.value.status == 500 and len(server.requests) == 3
    assert sleeps == [0.375, 0.75]  # backoff 0.5 s, 1 s, half of it jittered (random = 0.5)


async def test_other_4xx_are_not_retried(server: AnthropicServer, client: httpx.AsyncClient,
                                         sleeps: Sleeps) -> None:
    server.queue(Reply(status=400, json=load_json("anthropic/error_400.json")))
    with pytest.raises(ProviderError, match=r"HTTP 400\).*max_tokens: 100000 > 64000"):
        await make(server, client, sleeps).complete(ask())
    assert sleeps == [] and len(server.requests) == 1


async def test_a_long_retry_after_fails_at_once(server: AnthropicServer,
                                                client: httpx.AsyncClient, sleeps: Sleeps) -> None:
    server.queue(error(429, "rate_limit_error", "later", **{"retry-after": "3600"}))
    with pytest.raises(ProviderError, match="rate limited") as caught:
        await make(server, client, sleeps).complete(ask())
    assert caught.value.retry_after == 3600 and sleeps == []


@pytest.mark.parametrize(("key", "env", "expected"), [
    ("sk-wrong", "ANTHROPIC_API_KEY",
     r"API key was rejected .*missing or wrong.*\$ANTHROPIC_API_KEY"),
    (None, "TEAM_CLAUDE_KEY", r"no API key was sent .*missing or wrong.*\$TEAM_CLAUDE_KEY"),
])
async def test_401_names_the_key_variable(server: AnthropicServer, client: httpx.AsyncClient,
                                          key: str | None, env: str, expected: str) -> None:
    provider = make(server, client, api_key=key, api_key_env=env)
    with pytest.raises(ProviderError, match=expected) as caught:
        await provider.complete(ask())
    assert caught.value.status == 401 and len(server.requests) == 1


async def test_stream_cut_mid_way(server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hello", " wor"], complete=False, end="abort", chunks=9))
    deltas = Deltas()
    with pytest.raises(ProviderError, match="stream broke off mid-answer"):
        await make(server, client).complete(ask(), deltas)
    assert deltas == ["Hello", " wor"]


async def test_stream_that_ends_before_message_stop(server: AnthropicServer,
                                                    client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hello"], complete=False))
    with pytest.raises(ProviderError, match="ended before message_stop"):
        await make(server, client).complete(ask(), Deltas())


async def test_error_event_mid_stream(server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(sse=load("anthropic/stream_overloaded.sse"), chunks=11))
    with pytest.raises(ProviderError, match="overloaded_error: Overloaded") as caught:
        await make(server, client).complete(ask(), Deltas())
    assert caught.value.status == 529


@pytest.mark.parametrize(("reply", "expected"), [
    (Reply(body=b'{"id": "msg_01", "type": "mess'), "malformed response body"),
    (Reply(json={"type": "message", "content": "nope"}), "malformed response body: content"),
    (Reply(json=load_json("anthropic/message_refusal.json")), "refused to answer"),
])
async def test_bad_plain_bodies(server: AnthropicServer, client: httpx.AsyncClient,
                                reply: Reply, expected: str) -> None:
    server.queue(reply)
    with pytest.raises(ProviderError, match=expected):
        await make(server, client).complete(ask())


async def test_malformed_stream_event(server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(sse=b'event: message_start\ndata: {"type": "message_start", "mess\n\n'))
    with pytest.raises(ProviderError, match="malformed 'message_start' event"):
        await make(server, client).complete(ask(), Deltas())


async def test_cancellation_mid_stream_closes_the_connection(
        server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(stream(["Hel", "lo"], complete=False, end="hang"))
    deltas = Deltas()
    task = asyncio.create_task(make(server, client).complete(ask(), deltas))
    await deltas.first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(server.disconnected.wait(), 5)


async def test_unreachable_server_is_retried_then_reported(client: httpx.AsyncClient,
                                                           sleeps: Sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = AnthropicProvider("m", api_key=KEY, base_url=f"http://127.0.0.1:{port}",
                                 client=client, retry=Retry(max_retries=1, sleep=sleeps))
    with pytest.raises(ProviderError, match=f"cannot reach http://127.0.0.1:{port}/v1/messages"):
        await provider.complete(ask())
    assert len(sleeps) == 1


async def test_each_attempt_is_bounded_by_timeout_s(server: AnthropicServer,
                                                    client: httpx.AsyncClient) -> None:
    server.queue(Reply(wait=asyncio.Event()))  # never answers
    provider = make(server, client, max_retries=0, timeout_s=0.2)
    with pytest.raises(ProviderError, match=r"no response .* within 0.2 s"):
        await provider.complete(ask())
    await asyncio.wait_for(server.disconnected.wait(), 5)


# -- configuration ------------------------------------------------------------------------------

def test_make_provider_reads_the_key_from_the_named_variable(tmp_path: Path) -> None:
    cfg = ProviderConfig(kind="anthropic", model="claude-sonnet-4-5")
    with pytest.raises(ConfigError, match=r"provider\.api_key_env: .*ANTHROPIC_API_KEY"):
        make_provider(cfg, tmp_path, env={})
    custom = cfg.model_copy(update={"api_key_env": "TEAM_KEY", "base_url": "http://h:1"})
    with pytest.raises(ConfigError, match=r"provider\.api_key_env: .*TEAM_KEY is not set"):
        make_provider(custom, tmp_path, env={"ANTHROPIC_API_KEY": "x"})
    provider = make_provider(custom, tmp_path, env={"TEAM_KEY": "k"})
    assert isinstance(provider, AnthropicProvider)
    assert provider.transport.url == "http://h:1/v1/messages"
    assert provider.transport.headers["x-api-key"] == "k"
    with pytest.raises(ConfigError, match=r"provider\.model"):
        make_provider(ProviderConfig(kind="anthropic"), tmp_path, env={"ANTHROPIC_API_KEY": "k"})


# -- end to end ---------------------------------------------------------------------------------

async def test_runtime_round_trip_with_a_tool(server: AnthropicServer, client: httpx.AsyncClient,
                                              tmp_path: Path) -> None:
    @tool
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp": 21, "unit": unit}

    server.queue(
        stream(["Let me check."], [("toolu_01", "get_weather", ['{"city": ', '"Par', 'is"}'])],
               usage=(900, 40, 2048, 0), chunks=5),
        stream(["It is ", "21 °C in Paris."], usage=(30, 12, 0, 2048), chunks=(3, 17)))
    async with SQLiteStore(tmp_path / "maiden.db") as store, Runtime(
            store, make(server, client), ToolRegistry([get_weather]),
            agent=AgentConfig(system_prompt="You are a weather bot.")) as rt:
        async with rt.subscribe() as events:
            run = await rt.send("t1", "Weather in Paris?")
            seen = [await events.next()]
            while not isinstance(seen[-1], RunEnded):
                seen.append(await events.next())
        entries = await store.load_entries("t1")
    assert run.state is RunState.COMPLETED and run.reply == "It is 21 °C in Paris."
    assert [e.kind for e in entries] == ["user", "assistant", "tool_result", "assistant"]
    assert run.usage == Usage(input_tokens=930, output_tokens=52, cache_creation_tokens=2048,
                              cache_read_tokens=2048)
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == (
        "Let me check.It is 21 °C in Paris.")
    second = server.requests[1].json["messages"]
    assert second[-1] == {"role": "user", "content": [{
        "type": "tool_result", "tool_use_id": "toolu_01", "cache_control": CACHE,
        "content": '{"city": "Paris", "temp": 21, "unit": "celsius"}'}]}
