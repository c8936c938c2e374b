"""Asking the model for a run's next turn (runtime/engine/asking.py), against the fake vendor
servers: threads that never outgrow the model (a window by default, from the model's context
size), a "context too long" answer trimmed and retried once, and what each answer cost
published."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime import ModelAnswered, RunEvent, RunState, Runtime, SQLiteStore, UserMessage
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIProvider
from tests.fakes import anthropic, openai
from tests.fakes.anthropic import AnthropicServer
from tests.fakes.openai import OpenAIServer

WORDS = "lorem ipsum dolor sit amet " * 80  # ~2,200 characters, ~550 tokens


def openai_provider(server: OpenAIServer, model: str) -> OpenAIProvider:
    return OpenAIProvider(model, api_key="sk-test-key", base_url=server.base_url,
                          stream=False)


@asynccontextmanager
async def runtime(db: Path, provider: Any) -> AsyncIterator[Runtime]:
    async with SQLiteStore(db, synchronous="off") as store, Runtime(store, provider) as rt:
        yield rt


def sent_chars(server: OpenAIServer) -> list[int]:
    return [len(json.dumps(r.json["messages"])) for r in server.requests]


async def test_a_long_thread_is_never_sent_whole(tmp_path: Path) -> None:
    """gpt-4's 8k context: twenty long messages are far more, yet every request fits, the
    oldest entries left out with a notice; the store keeps them all."""
    async with OpenAIServer(context_tokens=8_192) as server:
        provider = openai_provider(server, "gpt-4")
        server.queue(*[openai.completion(f"answer {i}") for i in range(20)])
        async with runtime(tmp_path / "m.db", provider) as rt:
            for i in range(20):
                run = await rt.send("long", f"message {i}: {WORDS}")
                assert run.state == RunState.COMPLETED, run.error
            entries = await rt.records.entries("long")
        await provider.aclose()
    assert sum(isinstance(e, UserMessage) for e in entries) == 20
    assert max(sent_chars(server)) // 4 < 8_192
    last = server.requests[-1].json["messages"]
    assert "left out to fit the context window" in json.dumps(last)
    assert "message 19" in json.dumps(last) and "message 0:" not in json.dumps(last)


async def test_too_long_for_the_server_is_trimmed_and_retried_once(tmp_path: Path) -> None:
    """A local model maiden does not know (a 32k window assumed) whose server holds only
    2,000 tokens: refused once, sent again trimmed, answered."""
    async with OpenAIServer(context_tokens=2_000) as server:
        provider = openai_provider(server, "my-local-model")
        server.queue(*[openai.completion(f"answer {i}") for i in range(2)])
        async with runtime(tmp_path / "m.db", provider) as rt:
            first = await rt.send("t", f"one: {WORDS}")
            second = await rt.send("t", f"two: {WORDS * 3}")
        await provider.aclose()
    assert first.state == second.state == RunState.COMPLETED
    assert second.reply == "answer 1"
    sizes = sent_chars(server)
    assert len(sizes) == 3 and sizes[2] < sizes[1]  # the refused one, then the trimmed one
    retried = json.dumps(server.requests[2].json["messages"])
    assert "two:" in retried and "one:" not in retried


async def test_refused_again_the_run_fails_and_can_be_resumed(tmp_path: Path) -> None:
    async with OpenAIServer(context_tokens=200) as server:
        provider = openai_provider(server, "my-local-model")
        async with runtime(tmp_path / "m.db", provider) as rt:
            run = await rt.send("t", WORDS * 3)  # one message, too long even alone
            assert run.state == RunState.FAILED and run.reason == "provider_error"
            assert "maximum context length" in (run.error or "")
            assert len(server.requests) == 2  # tried once more, not forever
            server.context_tokens = None  # a bigger model behind the same name
            server.queue(openai.completion("finally"))
            await rt.resume(run.id)
            assert (await rt.wait(run.id)).reply == "finally"
        await provider.aclose()


async def test_anthropic_prompt_too_long_is_retried_trimmed(tmp_path: Path) -> None:
    async with AnthropicServer(context_tokens=6_000) as server:
        provider = AnthropicProvider("claude-x-unknown-size", api_key="sk-ant-test-key",
                                     base_url=server.base_url, stream=False,
                                     max_output_tokens=1_000)
        provider.context_window = 100_000  # as if the table said so: the server disagrees
        server.queue(*[anthropic.message(f"answer {i}") for i in range(3)])
        async with runtime(tmp_path / "m.db", provider) as rt:
            for i in range(2):
                await rt.send("t", f"m{i}: {WORDS * 3}")
            run = await rt.send("t", f"m2: {WORDS * 3}")
        await provider.aclose()
    assert run.reply == "answer 2"
    assert len(server.requests) == 4
    retried = json.dumps(server.requests[-1].json["messages"])
    assert "m2:" in retried and "m0:" not in retried


async def test_each_answer_is_published_with_its_model_and_tokens_once_even_when_retried(
        tmp_path: Path) -> None:
    async with OpenAIServer(context_tokens=2_000) as server:
        provider = openai_provider(server, "my-local-model")
        server.queue(openai.completion("answer 0", usage=(50, 10, 0)),
                     openai.completion("answer 1", usage=(70, 12, 0)))
        answered: list[ModelAnswered] = []

        def heard(event: RunEvent) -> None:
            if isinstance(event, ModelAnswered):
                answered.append(event)

        async with runtime(tmp_path / "m.db", provider) as rt:
            rt.listen(heard)
            first = await rt.send("t", f"one: {WORDS}")
            second = await rt.send("t", f"two: {WORDS * 3}")  # refused once, then trimmed
        await provider.aclose()
    assert len(server.requests) == 3
    assert [(a.run_id, a.model, a.input_tokens, a.output_tokens) for a in answered] == [
        (first.id, openai.MODEL, 50, 10), (second.id, openai.MODEL, 70, 12)]
    assert all(a.seconds > 0 and a.first_token_s is None for a in answered)  # not streamed
