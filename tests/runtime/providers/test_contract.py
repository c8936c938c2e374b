"""One suite, every HTTP provider: the behaviour Anthropic's and OpenAI's providers share,
run against each vendor's local fake server through real httpx.

What a vendor brings (its server, its wire format, its recordings) is in
``tests/fakes/vendors.py``; what only one vendor does is in its own test module.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import (
    AgentConfig,
    ConfigError,
    ModelRequest,
    ProviderConfig,
    ProviderError,
    RunEnded,
    RunState,
    Runtime,
    SQLiteStore,
    TextDelta,
    ToolRegistry,
    Usage,
    make_provider,
    tool,
)
from runtime.model.entries import RUN_FAILED, Entry, Notice, ToolCall, UserMessage
from tests.fakes.recorders import WEATHER, Deltas, Sleeps, ask, untidy_history
from tests.fakes.server import FakeServer, Reply, load, load_json
from tests.fakes.vendors import VENDORS, Failure, Vendor


@pytest.fixture(params=VENDORS, ids=repr)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    v: Vendor = request.param
    return v


@pytest.fixture
async def server(vendor: Vendor) -> AsyncIterator[FakeServer]:
    async with vendor.server() as s:
        yield s


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


# -- plain turns --------------------------------------------------------------------------------

async def test_plain_turn(vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json(vendor.plain.path)))
    response = await vendor.provider(server, client).complete(ask(tools=[WEATHER]))
    assert response == vendor.plain.response


async def test_plain_tool_calls(vendor: Vendor, server: FakeServer,
                                client: httpx.AsyncClient) -> None:
    server.queue(Reply(json=load_json(vendor.plain_tools.path)))
    response = await vendor.provider(server, client).complete(ask(tools=[WEATHER]))
    assert response == vendor.plain_tools.response


async def test_untidy_histories_make_requests_the_api_accepts(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    # The fake answers an invalid request with the 400 the real API would give.
    server.queue(vendor.reply("ok"))
    response = await vendor.provider(server, client).complete(
        ModelRequest(system="s", entries=untidy_history(), tools=[WEATHER]))
    assert response.text == "ok"


async def test_a_failed_runs_message_and_the_next_are_turns_of_their_own(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    """A failed run's message, closed by its notice, then the next message: the model is
    sent the notice as its own turn between them, never one user turn joining both."""
    server.queue(vendor.reply("ok"))
    entries: list[Entry] = [UserMessage(run_id="r1", text="go poison"),
               Notice(run_id="r1", code=RUN_FAILED, text="This request failed (poison_run)"),
               UserMessage(run_id="r2", text="after poison")]
    await vendor.provider(server, client).complete(ModelRequest(system="s", entries=entries))
    body = server.requests[-1].json
    sent = json.dumps(body)
    assert sent.count("go poison") == 1 and sent.count("after poison") == 1
    turns = [m for m in body["messages"] if m["role"] != "system"]
    assert [m["role"] for m in turns] == ["user", "assistant", "user"]
    assert "poison_run" in json.dumps(turns[1])


# -- streaming ----------------------------------------------------------------------------------

@pytest.mark.parametrize("chunks", [1, 3, 4, 7, 9, (5, 1, 2, 13, 64), (7, 1, 30, 2)])
async def test_streamed_parallel_tool_calls_at_awkward_boundaries(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient,
        chunks: int | Sequence[int]) -> None:
    server.queue(Reply(sse=load(vendor.tools_stream.path), chunks=chunks))
    deltas = Deltas()
    response = await vendor.provider(server, client).complete(ask(tools=[WEATHER]), deltas)
    assert deltas == list(vendor.tools_stream.deltas)
    assert response == vendor.tools_stream.response
    sent = server.requests[0]
    assert sent.json["stream"] is True and sent.headers["accept"] == "text/event-stream"


async def test_streamed_text_split_inside_utf8_characters(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    # One byte at a time cuts ü, — and ☀️ apart.
    server.queue(Reply(sse=load(vendor.text_stream.path), chunks=1))
    deltas = Deltas()
    response = await vendor.provider(server, client).complete(ask(), deltas)
    assert deltas == list(vendor.text_stream.deltas)
    assert response == vendor.text_stream.response and response.text == "".join(deltas)


async def test_streamed_turns_keep_their_connection(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    """A stream read to its end gives its connection back: the next turn needs no new
    connection (and, against the real API, no new TLS handshake)."""
    provider = vendor.provider(server, client)
    for _ in range(3):
        server.queue(Reply(sse=load(vendor.text_stream.path)))
        await provider.complete(ask(), Deltas())
    assert len({r.peer for r in server.requests}) == 1, [r.peer for r in server.requests]


async def test_no_streaming_without_a_sink_or_when_disabled(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    server.queue(vendor.reply("a"), vendor.reply("b"))
    assert (await vendor.provider(server, client).complete(ask())).text == "a"
    disabled = vendor.provider(server, client, stream=False)
    assert (await disabled.complete(ask(), Deltas())).text == "b"
    assert all("stream" not in r.json for r in server.requests)


@pytest.mark.parametrize(("fragments", "chunks"), [
    pytest.param(['{"city": "Par', 'is", "unit": '], 4, id="cut-after-a-key"),
    pytest.param(['{"city": "Par', 'is", '], 6, id="cut-after-a-comma"),
])
async def test_invalid_tool_argument_json_is_kept_raw(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient,
        fragments: list[str], chunks: int) -> None:
    server.queue(vendor.stream(calls=[("call_1", "get_weather", fragments)],
                               stop_reason=vendor.out_of_tokens, chunks=chunks))
    response = await vendor.provider(server, client).complete(ask(tools=[WEATHER]), Deltas())
    assert response.tool_calls == (ToolCall(id="call_1", name="get_weather",
                                            arguments="".join(fragments)),)
    assert response.stop_reason == vendor.out_of_tokens


# -- failures -----------------------------------------------------------------------------------

async def test_429_and_5xx_are_retried_after_the_servers_delay(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient, sleeps: Sleeps) -> None:
    server.queue(Reply(status=429, json=load_json(vendor.rate_limited),
                       headers={"retry-after": "2"}),
                 Reply(status=503, body=b"upstream connect error", headers={"retry-after": "0"}),
                 vendor.stream(["fine"]))
    response = await vendor.provider(server, client, sleeps).complete(ask(), Deltas())
    assert response.text == "fine"
    assert sleeps == [2.0, 0.0] and len(server.requests) == 3


@pytest.mark.parametrize(("max_retries", "streamed", "expected_sleeps"), [
    # backoff 0.5 s, 1 s, 2 s, half of it jittered (random = 0.5)
    pytest.param(2, False, [0.375, 0.75], id="plain-2-retries"),
    pytest.param(3, True, [0.375, 0.75, 1.5], id="streamed-3-retries"),
])
async def test_500_every_time_fails_after_the_retries(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient, sleeps: Sleeps,
        max_retries: int, streamed: bool, expected_sleeps: list[float]) -> None:
    attempts = max_retries + 1
    server.queue(*[vendor.server_error.reply] * attempts)
    provider = vendor.provider(server, client, sleeps, max_retries=max_retries)
    with pytest.raises(ProviderError, match=rf"server error \(HTTP 500\) after {attempts} "
                       rf"attempt\(s\): {vendor.server_error.says}") as caught:
        await provider.complete(ask(), Deltas() if streamed else None)
    assert caught.value.status == 500 and len(server.requests) == attempts
    assert sleeps == expected_sleeps


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_other_4xx_are_not_retried(vendor: Vendor, server: FakeServer,
                                         client: httpx.AsyncClient, sleeps: Sleeps,
                                         streamed: bool) -> None:
    server.queue(vendor.bad_request.reply)
    with pytest.raises(ProviderError, match=vendor.bad_request.says):
        await vendor.provider(server, client, sleeps).complete(
            ask(tools=[WEATHER]), Deltas() if streamed else None)
    assert sleeps == [] and len(server.requests) == 1


async def test_a_long_retry_after_fails_at_once(vendor: Vendor, server: FakeServer,
                                                client: httpx.AsyncClient, sleeps: Sleeps) -> None:
    server.queue(Reply(status=429, json=load_json(vendor.rate_limited),
                       headers={"retry-after": "3600"}))
    with pytest.raises(ProviderError, match="rate limited") as caught:
        await vendor.provider(server, client, sleeps).complete(ask())
    assert caught.value.retry_after == 3600 and sleeps == []


@pytest.mark.parametrize(("key", "env"), [("sk-wrong", None), (None, None), (None, "TEAM_KEY")])
async def test_401_names_the_key_variable(vendor: Vendor, server: FakeServer,
                                          client: httpx.AsyncClient, key: str | None,
                                          env: str | None) -> None:
    named: dict[str, Any] = {"api_key_env": env} if env else {}  # else the default
    expected = (rf"API key was rejected \(HTTP 401\).*missing or wrong.*\${vendor.key_env}.*"
                rf"{vendor.wrong_key_says}" if key else
                rf"no API key was sent \(HTTP 401\).*missing or wrong.*\${env or vendor.key_env}")
    provider = vendor.provider(server, client, api_key=key, **named)
    with pytest.raises(ProviderError, match=expected) as caught:
        await provider.complete(ask())
    assert caught.value.status == 401 and len(server.requests) == 1


@pytest.mark.parametrize("chunks", [9, 13])
async def test_stream_cut_mid_way(vendor: Vendor, server: FakeServer,
                                  client: httpx.AsyncClient, chunks: int) -> None:
    server.queue(vendor.stream(["Hello", " wor"], complete=False, end="abort", chunks=chunks))
    deltas = Deltas()
    with pytest.raises(ProviderError, match="stream broke off mid-answer"):
        await vendor.provider(server, client).complete(ask(), deltas)
    assert deltas == ["Hello", " wor"]


async def test_stream_that_ends_before_its_end_marker(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    server.queue(vendor.stream(["Hello"], complete=False))
    with pytest.raises(ProviderError, match=vendor.ended_early):
        await vendor.provider(server, client).complete(ask(), Deltas())


async def test_error_event_mid_stream(vendor: Vendor, server: FakeServer,
                                      client: httpx.AsyncClient) -> None:
    server.queue(vendor.error_mid_stream.reply)
    with pytest.raises(ProviderError, match=vendor.error_mid_stream.says) as caught:
        await vendor.provider(server, client).complete(ask(), Deltas())
    assert caught.value.status == vendor.error_mid_stream.status


UNPARSEABLE = {
    "cut-message": Failure(Reply(body=b'{"id": "msg_01", "type": "mess'),
                           "malformed response body"),
    "cut-completion": Failure(Reply(body=b'{"id": "chatcmpl-1", "choi'),
                              "malformed response body"),
    "html": Failure(Reply(body=b"<html>502 Bad Gateway</html>"), "malformed response body"),
}


@pytest.mark.parametrize(("vendor", "failure"), [
    pytest.param(v, failure, id=f"{v.name}-{case}")
    for v in VENDORS for case, failure in {**UNPARSEABLE, **v.bad_bodies}.items()])
async def test_bad_plain_bodies(vendor: Vendor, server: FakeServer, client: httpx.AsyncClient,
                                failure: Failure) -> None:
    server.queue(failure.reply)
    with pytest.raises(ProviderError, match=failure.says):
        await vendor.provider(server, client).complete(ask())


async def test_malformed_stream_event(vendor: Vendor, server: FakeServer,
                                      client: httpx.AsyncClient) -> None:
    server.queue(vendor.malformed_event.reply)
    with pytest.raises(ProviderError, match=vendor.malformed_event.says):
        await vendor.provider(server, client).complete(ask(), Deltas())


async def test_cancellation_mid_stream_closes_the_connection(
        vendor: Vendor, server: FakeServer, client: httpx.AsyncClient) -> None:
    server.queue(vendor.stream(["Hel", "lo"], complete=False, end="hang"))
    deltas = Deltas()
    task = asyncio.create_task(vendor.provider(server, client).complete(ask(), deltas))
    await deltas.first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(server.disconnected.wait(), 5)


async def test_unreachable_server_is_retried_then_reported(
        vendor: Vendor, client: httpx.AsyncClient, sleeps: Sleeps) -> None:
    async with vendor.server() as gone:
        provider = vendor.provider(gone, client, sleeps, max_retries=1)
    # Stopped: nothing listens on its port any more.
    with pytest.raises(ProviderError, match=f"cannot reach http://127.0.0.1:{gone.port}"
                                            f"{gone.path}"):
        await provider.complete(ask())
    assert len(sleeps) == 1


async def test_each_attempt_is_bounded_by_timeout_s(vendor: Vendor, server: FakeServer,
                                                    client: httpx.AsyncClient) -> None:
    server.queue(Reply(wait=asyncio.Event()))  # never answers
    provider = vendor.provider(server, client, max_retries=0, timeout_s=0.2)
    with pytest.raises(ProviderError, match=r"no response .* within 0.2 s"):
        await provider.complete(ask())
    await asyncio.wait_for(server.disconnected.wait(), 5)


# -- configuration ------------------------------------------------------------------------------

def test_make_provider_reads_the_key_from_its_variable(vendor: Vendor, tmp_path: Path) -> None:
    cfg = ProviderConfig(kind=vendor.name, model=vendor.model)
    with pytest.raises(ConfigError, match=rf"provider\.api_key_env: .*{vendor.key_env} is not set"):
        make_provider(cfg, tmp_path, env={})
    provider = make_provider(cfg, tmp_path, env={vendor.key_env: "k"})
    assert isinstance(provider, vendor.provider_class)
    assert provider.transport.url == vendor.url
    with pytest.raises(ConfigError, match=r"provider\.model: .*needs a model"):
        make_provider(ProviderConfig(kind=vendor.name), tmp_path, env={vendor.key_env: "k"})


# -- end to end ---------------------------------------------------------------------------------

async def test_runtime_round_trip_with_a_tool(vendor: Vendor, server: FakeServer,
                                              client: httpx.AsyncClient, tmp_path: Path) -> None:
    @tool
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        return {"city": city, "temp": 21, "unit": unit}

    server.queue(
        vendor.stream(["Let me check."], [("call_1", "get_weather", ['{"ci', 'ty": "Paris"}']),
                                          ("call_2", "get_weather", ['{"city": 5}'])],
                      usage=Usage(input_tokens=800, output_tokens=30), chunks=7),
        vendor.stream(["It is ", "21 °C in Paris."], chunks=(2, 11),
                      usage=Usage(input_tokens=132, output_tokens=10, cache_read_tokens=768)))
    async with SQLiteStore(tmp_path / "maiden.db") as store, Runtime(
            store, vendor.provider(server, client), ToolRegistry([get_weather]),
            agent=AgentConfig(system_prompt="You are a weather bot.")) as rt:
        async with rt.subscribe() as events:
            run = await rt.send("t1", "Weather in Paris?")
            seen = [await events.next()]
            while not isinstance(seen[-1], RunEnded):
                seen.append(await events.next())
        entries = await store.load_entries("t1")
    assert run.state is RunState.COMPLETED and run.reply == "It is 21 °C in Paris."
    assert [e.kind for e in entries] == ["user", "assistant", "tool_result", "tool_result",
                                         "assistant"]
    assert run.usage == Usage(input_tokens=932, output_tokens=40, cache_read_tokens=768)
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == (
        "Let me check.It is 21 °C in Paris.")
    second = server.requests[1].json
    assert vendor.system_prompt(second) == "You are a weather bot."
    results = vendor.tool_results(second)
    assert list(results) == ["call_1", "call_2"]
    assert results["call_1"] == '{"city": "Paris", "temp": 21, "unit": "celsius"}'
    assert '"invalid_arguments"' in results["call_2"]
