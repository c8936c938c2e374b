"""A knowledge source's ``shared_in`` (runtime/serving/shared_files.py), through the
runtime and a real indexing pass, on every store: a file sent in a thread of the place is
indexed once however often it is sent, found by ``search_knowledge`` from that place with
a citation naming it, not from another place, and dropped at the pass after its threads
are erased; files of other kinds, too big, or sent elsewhere are not taken."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime import (
    FilesStore,
    Origin,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolResult,
    ToolsConfig,
    make_tools,
)
from runtime.model.attachments import FileRef
from runtime.model.knowledge import KnowledgeConfig, open_sources
from runtime.serving.knowledge import Indexer, KnowledgeSearch
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, fresh_schema
from tests.scripted import call

AnyStore = SQLiteStore | FilesStore | PostgresStore

OPS = Origin(channel="slack", target={"channel": "C0OPS"}, place=("C0OPS",), private=True)
SALES = Origin(channel="slack", target={"channel": "C0SALES"}, place=("C0SALES",))
RUNBOOK = b"# Deploys\n\n## Rollback\n\nRun make rollback, then tell the on-call person.\n"


@pytest.fixture(params=["sqlite", "files", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    if request.param == "postgres":
        async with fresh_schema() as schema, \
                PostgresStore(PG_DSN, schema=schema, pool_size=4) as pg:
            yield pg
        return
    made: AnyStore = SQLiteStore(tmp_path / "k.db") if request.param == "sqlite" \
        else FilesStore(tmp_path / "files")
    async with made as opened:
        yield opened


async def shared(store: AnyStore, name: str, data: bytes, media_type: str) -> FileRef:
    info = await store.put_blob(data, media_type, 1.0)
    return FileRef(name=name, media_type=media_type, size=info.size, digest=info.digest)


async def searched(rt: Runtime, thread_id: str) -> dict[str, Any]:
    (result,) = [e for e in await rt.records.entries(thread_id) if isinstance(e, ToolResult)]
    assert isinstance(result.content, dict)
    return result.content


async def test_a_file_shared_in_a_place_is_searched_there_once_until_its_threads_go(
        store: AnyStore, tmp_path: Path) -> None:
    sources = [KnowledgeConfig(name="ops-files", shared_in=["slack:C0OPS"], max_file_bytes=500)]
    provider = ScriptedProvider([call("search_knowledge", query="rollback"), {"text": "ok"}])
    tools = make_tools(ToolsConfig(builtins=["search_knowledge"]), tmp_path)
    indexer = Indexer(store, sources, tmp_path)
    async with Runtime(store, provider, tools,
                       services={"knowledge": KnowledgeSearch(store, sources)}) as rt:
        runbook = await shared(store, "runbook.md", RUNBOOK, "text/markdown")
        notes = await shared(store, "notes", b"rollback notes, as plain text", "text/plain")
        image = await shared(store, "rollback.png", b"\x89PNG rollback", "image/png")
        big = await shared(store, "big.txt", b"rollback " * 100, "text/plain")
        elsewhere = await shared(store, "sales.md", b"rollback of a discount", "text/markdown")
        await rt.send("ops-1", "our runbook", origin=OPS, files=[runbook, notes, image, big])
        await rt.send("ops-2", "the runbook again", origin=OPS, files=[runbook])
        await rt.send("sales-1", "a doc", origin=SALES, files=[elsewhere])
        (status,) = await indexer.index()
        first = (status.folder, status.files, status.changed)
        files = await store.indexed_files("ops-files")
        await rt.send("ops-ask", "how do I roll back?", origin=OPS)
        await rt.send("sales-ask", "how do I roll back?", origin=SALES)
        ops, sales = await searched(rt, "ops-ask"), await searched(rt, "sales-ask")
        again = await indexer.index()
        files_again = await store.indexed_files("ops-files")
        await rt.delete_thread("ops-1")
        await indexer.index()
        after_one = [f.path for f in await store.indexed_files("ops-files")]
        await rt.delete_thread("ops-2")  # the last thread that carried them: gone at once
        after_both = await store.indexed_files("ops-files")
    runbook_path = f"shared/slack:C0OPS/runbook.md ({runbook.digest[:8]})"
    notes_path = f"shared/slack:C0OPS/notes ({notes.digest[:8]})"
    assert [(f.path, f.digest) for f in files] == [
        (notes_path, notes.digest), (runbook_path, runbook.digest)]  # the runbook once
    assert first == (None, 2, 2)
    assert ops["searched"] == ["ops-files"]
    assert ops["passages"][0]["cite"] == f"ops-files/{runbook_path}, Deploys > Rollback"
    assert ops["passages"][0]["text"].startswith("Run make rollback")
    assert {p["path"] for p in ops["passages"]} == {runbook_path, notes_path}
    assert sales["passages"] == []  # a private channel's file is not found elsewhere
    assert "no knowledge source is open" in sales["note"]
    assert files_again == files and again[0].changed == 0  # a second pass stores nothing
    assert after_one == [runbook_path]  # still shared in ops-2; the notes went with ops-1
    assert after_both == []
    assert await store.search_passages("rollback", ["ops-files"]) == []


async def test_a_source_with_a_folder_and_shared_files_keeps_both(
        store: AnyStore, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploys\n\nMerge, then tag.")
    (tmp_path / "docs" / "shared" / "slack:C0OPS").mkdir(parents=True)
    (tmp_path / "docs" / "shared" / "slack:C0OPS" / "x.md").write_text("not a shared file")
    sources = [KnowledgeConfig(name="ops", path="docs", shared_in=["slack:C0OPS"],
                               places=["slack:C0OPS", "slack:C0SALES"])]
    tools = make_tools(ToolsConfig(builtins=[]), tmp_path)
    async with Runtime(store, ScriptedProvider([{"text": "ok"}]), tools) as rt:
        runbook = await shared(store, "runbook.md", RUNBOOK, "text/markdown")
        await rt.send("ops-1", "our runbook", origin=OPS, files=[runbook])
        indexer = Indexer(store, sources, tmp_path)
        await indexer.index()
        await indexer.index()
        paths = [f.path for f in await store.indexed_files("ops")]
        await rt.delete_thread("ops-1")
        await indexer.index()
        left = [f.path for f in await store.indexed_files("ops")]
    assert paths == ["deploy.md", f"shared/slack:C0OPS/runbook.md ({runbook.digest[:8]})"]
    assert left == ["deploy.md"]
    assert open_sources(sources, "maiden", SALES) == ["ops"]  # places, said explicitly


def test_a_source_needs_a_folder_or_shared_places() -> None:
    with pytest.raises(ValidationError, match=r"path.*shared_in"):
        KnowledgeConfig(name="nothing")
    with pytest.raises(ValidationError, match="not a place"):
        KnowledgeConfig(name="bad", shared_in=["C0OPS"])
    only_shared = KnowledgeConfig(name="ops", shared_in=["slack:C0OPS"])
    assert open_sources([only_shared], "maiden", OPS) == ["ops"]
    assert open_sources([only_shared], "maiden", SALES) == []
    assert open_sources([only_shared], "maiden", Origin()) == []
