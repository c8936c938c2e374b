"""What only the Anthropic provider does, against a local fake of the Messages API: the
request's shape, prompt-cache breakpoints, placeholder tools on a final turn, the 529
"overloaded" status, cache writes. What every provider does is in test_contract.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import (
    AgentConfig,
    AssistantTurn,
    ConfigError,
    Entry,
    ModelRequest,
    Notice,
    ProviderConfig,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    ToolResult,
    Usage,
    UserMessage,
    make_provider,
    tool,
)
from runtime.model.entries import ToolCall
from runtime.providers.anthropic import AnthropicProvider, to_messages
from tests.fakes.anthropic import AnthropicServer, message, stream
from tests.fakes.recorders import WEATHER, Deltas, Sleeps, ask, untidy_history
from tests.fakes.server import Reply, load_json
from tests.fakes.vendors import ANTHROPIC

KEY = ANTHROPIC.key
CACHE = {"type": "ephemeral"}


@pytest.fixture
async def server() -> AsyncIterator[AnthropicServer]:
    async with AnthropicServer(KEY) as s:
        yield s


# -- plain turns and the request's shape ------------------------------------------------------

async def test_plain_request(server: AnthropicServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("anthropic/message_text.json")))
    await ANTHROPIC.provider(server, client).complete(ask(tools=[WEATHER]))
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


async def test_output_token_limit_and_temperature(server: AnthropicServer,
                                                  client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json("anthropic/message_tool_use.json")))
    provider = ANTHROPIC.provider(server, client, max_output_tokens=1000, temperature=0.2)
    await provider.complete(ask(tools=[WEATHER]))
    body = server.requests[0].json
    assert (body["max_tokens"], body["temperature"]) == (1000, 0.2)


def history() -> list[Entry]:
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
    await ANTHROPIC.provider(server, client).complete(request)
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
    response = await ANTHROPIC.provider(server, client).complete(
        ModelRequest(system="", entries=history(), tools=(), final_turn=True))
    assert response.text == "Done."
    body = server.requests[0].json
    assert body["tool_choice"] == {"type": "none"} and "system" not in body
    assert body["tools"] == [{"name": "get_weather", "description": "Not available on this turn.",
                              "input_schema": {"type": "object"}, "cache_control": CACHE}]


async def test_untidy_histories_still_make_valid_requests(server: AnthropicServer,
                                                          client: httpx.AsyncClient) -> None:
    server.queue(message("ok"))
    request = ModelRequest(system="s", entries=untidy_history(), tools=[WEATHER])
    await ANTHROPIC.provider(server, client).complete(request)
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


# -- retries ------------------------------------------------------------------------------------

async def test_529_overloaded_with_retry_after_ms_then_success(
        server: AnthropicServer, client: httpx.AsyncClient) -> None:
    sleeps = Sleeps()
    server.queue(Reply(status=529, json=load_json("anthropic/error_529.json"),
                       headers={"retry-after-ms": "1500"}),
                 stream(["fine"]))
    response = await ANTHROPIC.provider(server, client, sleeps).complete(ask(), Deltas())
    assert response.text == "fine"
    assert sleeps == [1.5] and len(server.requests) == 2


# -- configuration ------------------------------------------------------------------------------

def test_make_provider_with_a_custom_key_variable_and_base_url(tmp_path: Path) -> None:
    custom = ProviderConfig(kind="anthropic", model="claude-sonnet-4-5", api_key_env="TEAM_KEY",
                            base_url="http://h:1")
    with pytest.raises(ConfigError, match=r"provider\.api_key_env: .*TEAM_KEY is not set"):
        make_provider(custom, tmp_path, env={"ANTHROPIC_API_KEY": "x"})
    provider = make_provider(custom, tmp_path, env={"TEAM_KEY": "k"})
    assert isinstance(provider, AnthropicProvider)
    assert provider.transport.url == "http://h:1/v1/messages"
    assert provider.transport.headers["x-api-key"] == "k"


# -- end to end ---------------------------------------------------------------------------------

async def test_a_run_adds_up_cache_writes_and_reads_and_caches_the_tool_result(
        server: AnthropicServer, client: httpx.AsyncClient, tmp_path: Path) -> None:
    @tool
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp": 21, "unit": unit}

    server.queue(
        stream(["Let me check."], [("toolu_01", "get_weather", ['{"city": ', '"Par', 'is"}'])],
               usage=(900, 40, 2048, 0), chunks=5),
        stream(["It is ", "21 °C in Paris."], usage=(30, 12, 0, 2048), chunks=(3, 17)))
    async with SQLiteStore(tmp_path / "maiden.db") as store, Runtime(
            store, ANTHROPIC.provider(server, client), ToolRegistry([get_weather]),
            agent=AgentConfig(system_prompt="You are a weather bot.")) as rt:
        run = await rt.send("t1", "Weather in Paris?")
    assert run.reply == "It is 21 °C in Paris."
    assert run.usage == Usage(input_tokens=930, output_tokens=52, cache_creation_tokens=2048,
                              cache_read_tokens=2048)
    second = server.requests[1].json["messages"]
    assert second[-1] == {"role": "user", "content": [{
        "type": "tool_result", "tool_use_id": "toolu_01", "cache_control": CACHE,
        "content": '{"city": "Paris", "temp": 21, "unit": "celsius"}'}]}
