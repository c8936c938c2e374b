"""Team memory and knowledge end to end through the OpenAI provider against the fake
OpenAI Chat Completions server (tests/fakes/openai.py), on a real runtime and SQLite store:
what is asserted is what crossed the wire, each request having passed the fake's API rules.
A place memory kept in one thread is recalled without asking in the first request of
another thread of the place, with its source, and not where it may not be seen; a
``search_knowledge`` result reaches the model as a ``tool`` message with its citation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from runtime import Origin, Runtime, SQLiteStore, ToolsConfig, make_tools
from runtime.model.knowledge import KnowledgeConfig
from runtime.model.memories import PlaceScope
from runtime.providers.openai import OpenAIProvider
from runtime.serving.knowledge import Indexer, KnowledgeSearch
from runtime.serving.memories import Memories
from tests.fakes.openai import OpenAIServer, completion, stream
from tests.fakes.openai import _check_messages as openai_rules
from tests.fakes.server import Reply

TALK = ("talk",)
ANA_C1 = Origin(channel="slack", user="U1", place=("C1",), rights=TALK)
BOB_C1 = Origin(channel="slack", user="U2", place=("C1",), rights=TALK)
BOB_SECRET = Origin(channel="slack", user="U2", place=("G9",), private=True, rights=TALK)
CAROL_DM = Origin(channel="slack", user="U3", place=("D3",), direct=True, private=True,
                  rights=TALK)
DEPLOYS = "deploys happen on Tuesdays"


class Chat:
    """A chat channel's deliverer: keeps what it is asked to post."""

    max_chars: int | None = None

    def __init__(self) -> None:
        self.posted: list[Any] = []

    async def send(self, delivery: Any) -> str:
        self.posted.append(delivery)
        return f"p{len(self.posted)}"

    async def reconcile(self, delivery: Any) -> str | None:
        return None


def reply(streamed: bool, text: str | None = None,
          call: tuple[str, str, dict[str, Any]] | None = None) -> Reply:
    """The model's answer: a text, or one tool call ``(id, name, arguments)``."""
    if streamed:
        if call is None:
            return stream([text or ""])
        arguments = json.dumps(call[2])
        half = len(arguments) // 2
        return stream(calls=[(call[0], call[1], [arguments[:half], arguments[half:]])])
    if call is None:
        return completion(text)
    return completion(calls=[(call[0], call[1], json.dumps(call[2]))])


def messages(server: OpenAIServer, index: int) -> list[dict[str, Any]]:
    return list(server.requests[index].json["messages"])


def content(message: dict[str, Any]) -> str:
    """A message's text, whether a string or a list of text parts."""
    text = message.get("content")
    if isinstance(text, list):
        return "".join(p.get("text", "") for p in text)
    return text or ""


def wire_text(server: OpenAIServer, index: int) -> str:
    return "\n".join(content(m) for m in messages(server, index))


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
async def test_a_place_memory_is_kept_then_recalled_over_the_wire_where_it_may_be(
        tmp_path: Path, streamed: bool) -> None:
    registry = make_tools(ToolsConfig.model_validate({"builtins": ["memory"]}), tmp_path)
    async with OpenAIServer() as server:
        provider = OpenAIProvider("gpt-4.1", api_key="sk-test-key", base_url=server.base_url,
                                  stream=streamed)
        server.queue(
            # Thread A: Ana says it; the model keeps it for the place, then answers.
            reply(streamed, call=("call_1", "remember", {"text": DEPLOYS, "scope": "place"})),
            reply(streamed, "Noted: deploys are on Tuesdays."),
            # Thread B of the same place: asked, the model answers from what it was given.
            reply(streamed, "On Tuesdays."),
            # A private channel, and someone else's DM: asked the same.
            reply(streamed, "I don't know."),
            reply(streamed, "I don't know."))
        async with SQLiteStore(tmp_path / "m.db") as store, \
                Runtime(store, provider, registry) as rt:
            kept = await rt.send("slack:C1:1", "remember: deploys happen on Tuesdays",
                                 origin=ANA_C1)
            asked = await rt.send("slack:C1:2", "when do we deploy?", origin=BOB_C1)
            secret = await rt.send("slack:G9:1", "when do we deploy?", origin=BOB_SECRET)
            dm = await rt.send("slack:D3", "when do we deploy?", origin=CAROL_DM)
            # What the tool answered the model (on the wire) names the memory kept.
            (result,) = [m for m in messages(server, 1) if m["role"] == "tool"]
            memory_id = json.loads(content(result))["remembered"]
            memory = await Memories(store, time.time).lookup(memory_id)
        await provider.aclose()
    assert [r.state for r in (kept, asked, secret, dm)] == ["completed"] * 4
    assert (kept.reply, asked.reply) == ("Noted: deploys are on Tuesdays.", "On Tuesdays.")
    assert len(server.requests) == 5  # no request refused by the fake's API rules
    assert all(openai_rules(r.json["messages"]) is None for r in server.requests)

    # 1. Kept with where it came from: who, where, which thread and run.
    assert result["tool_call_id"] == "call_1"
    assert memory is not None and memory.text == DEPLOYS
    assert memory.scope == PlaceScope(channel="slack", place="C1", private=False)
    source = memory.provenance
    assert (source.user, source.channel, source.place, source.private) == (
        "slack:U1", "slack", "C1", False)
    assert (source.thread_id, source.run_id) == ("slack:C1:1", kept.id)

    # 2. Recalled without asking: in the first request of thread B's run, with its source,
    # before the new message.
    first = messages(server, 2)
    asking = first[-1]
    assert asking["role"] == "user"
    said = content(asking)
    # The notice goes with the message, before it (one user message on the wire).
    assert said.startswith("[notice] Memories that may bear on this message")
    assert said.rstrip().endswith("when do we deploy?")
    line = f"- [{memory_id}] {DEPLOYS} (slack:U1, slack #C1, "
    assert line in said and said.index(line) < said.index("when do we deploy?")
    assert "; place)" in said
    assert [m for m in first if DEPLOYS in content(m)] == [asking]
    # Not in a private channel of the same person, nor in someone else's DM.
    for private in (3, 4):
        assert DEPLOYS not in wire_text(server, private)
        assert "Memories that may bear" not in wire_text(server, private)
        assert content(messages(server, private)[-1]) == "when do we deploy?"


HANDBOOK = {
    "deploys.md": "# Deploys\n\nWe ship from main.\n\n## Rollback\n\n"
                  "Run make rollback from the release branch.\n",
    "leave.md": "# Leave\n\n## Holidays\n\nAsk your lead two weeks ahead.\n",
}


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
async def test_a_knowledge_passage_reaches_the_model_with_its_citation(
        tmp_path: Path, streamed: bool) -> None:
    (tmp_path / "handbook").mkdir()
    for name, text in HANDBOOK.items():
        (tmp_path / "handbook" / name).write_text(text)
    sources = [KnowledgeConfig(name="handbook", path="handbook")]
    registry = make_tools(ToolsConfig(builtins=["search_knowledge"]), tmp_path)
    chat = Chat()
    async with OpenAIServer() as server:
        provider = OpenAIProvider("gpt-4.1", api_key="sk-test-key", base_url=server.base_url,
                                  stream=streamed)
        server.queue(
            reply(streamed, call=("call_k", "search_knowledge", {"query": "rollback"})),
            reply(streamed, "Run make rollback (handbook/deploys.md, Deploys > Rollback)."))
        async with SQLiteStore(tmp_path / "k.db") as store:
            await Indexer(store, sources, tmp_path).index()
            async with Runtime(store, provider, registry, deliverers={"slack": chat},
                               services={"knowledge": KnowledgeSearch(store, sources)}) as rt:
                run = await rt.send("slack:C1:7", "how do I roll back?", origin=Origin(
                    channel="slack", target={"channel": "C1"}, user="U2", place=("C1",),
                    rights=TALK))
                await rt.idle()  # its worker has posted the reply
        await provider.aclose()
    assert run.state == "completed"
    assert run.reply == "Run make rollback (handbook/deploys.md, Deploys > Rollback)."
    # The answer is delivered to where it was asked.
    (posted,) = chat.posted
    assert posted.text == run.reply and posted.target == {"channel": "C1"}
    assert len(server.requests) == 2
    assert all(openai_rules(r.json["messages"]) is None for r in server.requests)
    offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert "search_knowledge" in offered
    # The next request carries the call and its result as an OpenAI ``tool`` message.
    second = messages(server, 1)
    (asked,) = [m for m in second if m["role"] == "assistant" and m.get("tool_calls")]
    assert asked["tool_calls"][0]["function"]["name"] == "search_knowledge"
    (result,) = [m for m in second if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_k" and isinstance(result["content"], str)
    found = json.loads(result["content"])
    assert found["searched"] == ["handbook"]
    top = found["passages"][0]
    assert top["cite"] == "handbook/deploys.md, Deploys > Rollback"
    assert "Run make rollback from the release branch." in top["text"]
