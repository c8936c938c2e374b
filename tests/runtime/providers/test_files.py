"""Files as each vendor's model sees them, checked at the wire: the fake servers refuse a
content part the real APIs refuse, and record what they were sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import Runtime, SQLiteStore, ToolImage, ToolRegistry, tool
from runtime.model.attachments import Seeing
from tests.fakes import anthropic, openai
from tests.fakes.server import FakeServer
from tests.fakes.vendors import ANTHROPIC, OPENAI, Vendor
from tests.samples import pdf, png


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "m.db") as opened:
        yield opened


async def _ask(vendor: Vendor, server: FakeServer, client: httpx.AsyncClient, store: SQLiteStore,
               **options: Any) -> list[tuple[str, str]]:
    """Send one message with a PNG, a PDF and a CSV; what the model was shown of them."""
    server.queue(vendor.stream(["seen"]))
    provider = vendor.provider(server, client, **options)
    async with Runtime(store, provider) as rt:
        files = [await rt.kept.files.put("shot.png", "image/png", png(800, 600)),
                 await rt.kept.files.put("invoice.pdf", None, pdf("Total due: 42 EUR")),
                 await rt.kept.files.put("data.csv", "text/csv", b"a,b\n1,2\n")]
        run = await rt.send("t", "what is wrong here?", files=files)
    assert run.reply == "seen", run.error
    body = server.requests[-1].json
    seen = anthropic.files_seen(body) if vendor is ANTHROPIC else openai.files_seen(body)
    return seen


async def test_anthropic_takes_images_and_pdfs_as_blocks(
        client: httpx.AsyncClient, store: SQLiteStore) -> None:
    async with ANTHROPIC.server() as server:
        seen = await _ask(ANTHROPIC, server, client, store)
        blocks = server.requests[-1].json["messages"][0]["content"]
    assert seen[:2] == [("image", "image/png"), ("document", "application/pdf")]
    assert seen[2][0] == "text" and seen[2][1].startswith("[file data.csv (text/csv, 8 bytes)]\n"
                                                          "a,b\n1,2\n")
    assert blocks[-1]["text"] == "what is wrong here?"  # the files before the question


async def test_openai_takes_images_as_image_urls_and_pdfs_as_files(
        client: httpx.AsyncClient, store: SQLiteStore) -> None:
    async with OPENAI.server() as server:
        # As on OpenAI's own API (the fake's URL is not api.openai.com: told so here).
        seen = await _ask(OPENAI, server, client, store, seeing=Seeing(images=True, pdfs=True))
    assert seen[:2] == [("image_url", "image/png"), ("file", "invoice.pdf")]
    assert seen[2][1].startswith("[file data.csv")


async def test_a_compatible_server_gets_a_pdfs_text_and_no_vision_gets_notes(
        client: httpx.AsyncClient, store: SQLiteStore) -> None:
    async with OPENAI.server() as server:
        seen = await _ask(OPENAI, server, client, store)  # a compatible server: PDFs as text
        assert seen[0] == ("image_url", "image/png")
        assert seen[1][1].startswith("[file invoice.pdf (application/pdf, 1 page, ")
        assert "Total due: 42 EUR" in seen[1][1]
        blind = await _ask(OPENAI, server, client, store, seeing=Seeing())
    assert blind[0][1].startswith("[image shot.png (image/png, 800x600, ")
    assert blind[0][1].endswith("this model cannot see images]")


async def test_make_provider_reads_vision_and_pdf_from_the_config() -> None:
    from runtime import ProviderConfig, make_provider

    env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}
    cases = [({"kind": "anthropic", "model": "claude-x"}, Seeing(True, True)),
             ({"kind": "anthropic", "model": "claude-x", "vision": False, "pdf": "text"},
              Seeing(False, False)),
             ({"kind": "openai", "model": "gpt-4.1"}, Seeing(True, True)),
             ({"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1"},
              Seeing(True, False)),
             ({"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1",
               "pdf": "native"}, Seeing(True, True))]
    for options, seeing in cases:
        provider = make_provider(ProviderConfig(**options), Path("."), env)  # type: ignore[arg-type]
        assert provider.seeing == seeing, options  # type: ignore[attr-defined]
        await provider.aclose()  # type: ignore[attr-defined]


async def test_openai_gets_a_tools_images_after_the_turns_results(
        client: httpx.AsyncClient, store: SQLiteStore) -> None:
    @tool
    def snap() -> list[Any]:
        """A screenshot."""
        return ["the page:", ToolImage("image/png", png(50, 40))]

    async with OPENAI.server() as server:
        server.queue(OPENAI.stream(calls=[("call_1", "snap", ["{}"])]), OPENAI.stream(["ok"]))
        async with Runtime(store, OPENAI.provider(server, client), ToolRegistry([snap])) as rt:
            run = await rt.send("t", "what does the page show?")
        assert run.reply == "ok", run.error
        messages = server.requests[-1].json["messages"]
    tool_message, shown = messages[-2:]
    assert tool_message["role"] == "tool" and isinstance(tool_message["content"], str)
    assert shown["role"] == "user"
    assert [p["type"] for p in shown["content"]] == ["text", "image_url"]
