"""The model provider's connections under a real runtime: each turn reuses a kept-alive
connection, also when many threads call the model at once (``concurrency = "thread"``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import (
    Provider,
    ProviderConfig,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
    make_provider,
    tool,
)
from runtime.providers.openai import OpenAIProvider
from tests.fakes import openai
from tests.fakes.openai import OpenAIServer
from tests.fakes.server import Reply

THREADS = 30
"""More model calls at once than httpx keeps idle connections by default (20)."""


class _Gated(OpenAIServer):
    """Holds each wave's replies until all its calls have arrived, so that they are all in
    flight at once: each on a connection of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.expected = 0
        self.all_in = asyncio.Event()

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        if len(self.requests) >= self.expected:
            self.all_in.set()
        return super().validate(headers, body)


def _provider(server: OpenAIServer, tmp_path: Path) -> Provider:
    """The provider `maiden run` builds from its config (its own HTTP client)."""
    return make_provider(ProviderConfig(kind="openai", model="gpt-4.1", base_url=server.base_url,
                                        api_key_env="TEST_OPENAI_KEY"),
                         tmp_path, env={"TEST_OPENAI_KEY": "sk-test-key"})


@tool(effect="read_only")
def lookup(query: str) -> dict[str, str]:
    """Look a question up."""
    return {"answer": query.upper()}


async def test_streamed_turns_of_several_messages_share_one_connection(tmp_path: Path) -> None:
    """Messages one after another, each a tool call and an answer, all streamed: every
    model call on the connection the first one opened."""
    async with OpenAIServer() as server:
        provider = _provider(server, tmp_path)
        assert isinstance(provider, OpenAIProvider)
        try:
            async with SQLiteStore(tmp_path / "m.db") as store, Runtime(
                    store, provider, ToolRegistry([lookup])) as rt:
                for i in range(5):
                    server.queue(openai.stream(calls=[(f"call_{i}", "lookup",
                                                       ['{"query": "x"}'])]),
                                 openai.stream([f"answer {i}"]))
                    run = await rt.send("t", f"message {i}")
                    assert (run.state, run.reply) == (RunState.COMPLETED, f"answer {i}")
        finally:
            await provider.aclose()
    assert len(server.requests) == 10
    assert all(r.json.get("stream") for r in server.requests)
    assert len({r.peer for r in server.requests}) == 1, [r.peer for r in server.requests]


async def _wave(rt: Runtime, server: _Gated, wave: int) -> None:
    """One message on each thread at once."""
    server.all_in = asyncio.Event()
    server.expected = len(server.requests) + THREADS
    replies = [openai.stream([f"answer {wave}"]) for _ in range(THREADS)]
    for reply in replies:
        reply.wait = server.all_in
    server.queue(*replies)
    runs = await asyncio.gather(*(rt.send(f"t{i}", f"message {wave}") for i in range(THREADS)))
    assert {(r.state, r.reply) for r in runs} == {(RunState.COMPLETED, f"answer {wave}")}


async def test_concurrent_streamed_turns_keep_their_connections(tmp_path: Path) -> None:
    """Many threads calling the model at once: the connections the first wave opened
    carry the next waves, none opened again (httpx's default pool kept 20 of them)."""
    async with _Gated() as server:
        provider = _provider(server, tmp_path)
        assert isinstance(provider, OpenAIProvider)
        try:
            async with SQLiteStore(tmp_path / "m.db") as store, Runtime(
                    store, provider, settings=RuntimeConfig(concurrency="thread")) as rt:
                for wave in range(3):
                    await _wave(rt, server, wave)
        finally:
            await provider.aclose()
    assert len(server.requests) == 3 * THREADS
    assert all(r.json.get("stream") for r in server.requests)
    peers = {r.peer for r in server.requests}
    assert len(peers) == THREADS, f"{len(peers)} connections for {len(server.requests)} calls"
