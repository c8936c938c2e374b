"""The indexing pass (``runtime/serving/knowledge.py``) over a real folder into real stores:
new, changed and vanished files, what a source leaves out (other kinds, ``exclude``, files
too big, links out of the folder), a source gone from the config, a folder not there; a
second pass over nothing new stores nothing. And ``keep_indexed``: one process at a time
among those on a store, by the lease."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime import FilesStore, Runtime, ScriptedProvider, SQLiteStore
from runtime.model.knowledge import KnowledgeConfig
from runtime.serving.knowledge import KNOWLEDGE_LEASE, Indexer, keep_indexed

AnyStore = SQLiteStore | FilesStore

DEPLOY = "# Deploys\n\nMerge, then tag.\n\n## Rollback\n\nRun make rollback.\n"


@pytest.fixture(params=["sqlite", "files"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    made: AnyStore = SQLiteStore(tmp_path / "k.db") if request.param == "sqlite" \
        else FilesStore(tmp_path / "files")
    async with made as opened:
        yield opened


def source(name: str = "runbooks", path: str = "docs", **more: Any) -> KnowledgeConfig:
    return KnowledgeConfig.model_validate({"name": name, "path": path, **more})


def write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content)
        else:
            path.write_bytes(content)


async def held(store: AnyStore) -> dict[str, tuple[str, int, list[str]]]:
    """Each stored file (source/path): its digest's head, its passages' count, and the
    passages a search for its own words finds."""
    files = await store.indexed_files()
    return {f"{f.source}/{f.path}": (f.digest[:8], f.passages,
                                     sorted(p.text for p in await store.search_passages(
                                         "merge tag rollback text notes", [f.source],
                                         limit=50) if p.path == f.path))
            for f in files}


async def test_a_pass_stores_new_and_changed_files_and_drops_vanished_ones(
        store: AnyStore, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    docs = tmp_path / "docs"
    write(docs, {"deploy.md": DEPLOY, "ops/notes.txt": "Some notes.\n\nMore text.",
                 "ops/page.HTML": "<h1>Rollback</h1><p>Press the button.</p>",
                 "image.png": b"\x89PNG not a document", "drafts/wip.md": "# Merge soon",
                 "big.md": "merge " * 100, ".git/notes.md": "merge", ".hidden.md": "tag"})
    indexer = Indexer(store, [source(exclude=["drafts/**"], max_file_bytes=300)], tmp_path)
    lines: list[str] = []
    with caplog.at_level(logging.INFO, logger="maiden.knowledge"):
        (status,) = await indexer.index(progress=lines.append)
    first = await held(store)
    assert sorted(first) == ["runbooks/deploy.md", "runbooks/ops/notes.txt",
                             "runbooks/ops/page.HTML"]
    assert first["runbooks/deploy.md"][1:] == (2, ["Merge, then tag.", "Run make rollback."])
    (section,) = {p.section for p in await store.search_passages("button", ["runbooks"])}
    assert section == "Rollback"
    assert (status.files, status.passages, status.changed, status.removed) == (3, 4, 3, 0)
    assert status.last_error is None and not status.running and status.last_pass_at
    assert lines == ["runbooks: 3 of 3 files, 3 changed, 0 removed"]
    assert "big.md passed over: over max_file_bytes (300 bytes)" in caplog.text

    # Again with nothing new: nothing is stored, not even the same passages again.
    (status,) = await indexer.index()
    assert (status.changed, status.removed) == (0, 0) and await held(store) == first

    (docs / "deploy.md").write_text(DEPLOY.replace("Merge, then tag.", "Merge and tag."))
    (docs / "ops" / "notes.txt").unlink()
    write(docs, {"new.md": "More notes here."})
    (status,) = await indexer.index()
    after = await held(store)
    assert sorted(after) == ["runbooks/deploy.md", "runbooks/new.md", "runbooks/ops/page.HTML"]
    assert after["runbooks/deploy.md"][2] == ["Merge and tag.", "Run make rollback."]
    assert after["runbooks/ops/page.HTML"] == first["runbooks/ops/page.HTML"]
    assert (status.files, status.changed, status.removed) == (3, 2, 1)


async def test_a_source_gone_from_the_config_is_dropped_and_a_missing_folder_kept(
        store: AnyStore, tmp_path: Path) -> None:
    write(tmp_path / "docs", {"deploy.md": DEPLOY})
    write(tmp_path / "other", {"notes.txt": "notes"})
    both = [source(), source("other", "other")]
    await Indexer(store, both, tmp_path).index()
    assert sorted(await held(store)) == ["other/notes.txt", "runbooks/deploy.md"]

    # A folder not there (a share not mounted yet) keeps what was indexed of it.
    (tmp_path / "docs").rename(tmp_path / "unmounted")
    lines: list[str] = []
    done = await Indexer(store, both, tmp_path).index(progress=lines.append)
    assert "folder not found" in (done[0].last_error or "")
    assert (done[0].files, done[0].passages) == (1, 2)
    assert sorted(await held(store)) == ["other/notes.txt", "runbooks/deploy.md"]

    other = Indexer(store, [source("other", "other")], tmp_path)
    busy: list[tuple[bool, bool]] = []  # at each line: a pass under way, a source walked

    def told(line: str) -> None:
        lines.append(line)
        busy.append((other.indexing, any(s.running for s in other.status())))

    assert not other.indexing
    await other.index(progress=told)
    assert sorted(await held(store)) == ["other/notes.txt"]
    assert lines[-1] == "runbooks: no longer configured; its files dropped"
    assert busy == [(True, True), (True, False)] and not other.indexing


async def test_links_out_of_the_folder_are_not_followed(store: AnyStore, tmp_path: Path
                                                        ) -> None:
    outside = tmp_path / "secret"
    write(outside, {"keys.md": "merge the private keys"})
    docs = tmp_path / "docs"
    write(docs, {"deploy.md": DEPLOY})
    os.symlink(outside, docs / "linked-folder")
    os.symlink(outside / "keys.md", docs / "linked.md")
    os.symlink(docs / "deploy.md", docs / "again.md")  # a link inside the folder is taken
    os.symlink(docs / "nowhere.md", docs / "broken.md")
    await Indexer(store, [source()], tmp_path).index()
    assert sorted(await held(store)) == ["runbooks/again.md", "runbooks/deploy.md"]


async def test_an_unreadable_file_keeps_its_old_passages(store: AnyStore, tmp_path: Path
                                                         ) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    write(tmp_path / "docs", {"deploy.md": DEPLOY})
    indexer = Indexer(store, [source()], tmp_path)
    await indexer.index()
    before = await held(store)
    (tmp_path / "docs" / "deploy.md").chmod(0)
    (status,) = await indexer.index()
    assert await held(store) == before
    assert "could not be read: deploy.md" in (status.last_error or "")


async def test_one_process_on_a_store_indexes_at_a_time(tmp_path: Path) -> None:
    """Two runtimes on one store: while one holds the lease, the other's pass is left to
    it; once released, the other takes it."""
    write(tmp_path / "docs", {"deploy.md": DEPLOY})
    async with SQLiteStore(tmp_path / "k.db") as store, \
            Runtime(store, ScriptedProvider([])) as first, \
            Runtime(store, ScriptedProvider([])) as second:
        assert await first.operator.take_lease(KNOWLEDGE_LEASE) is None
        indexer = Indexer(store, [source()], tmp_path)
        await keep_indexed(indexer, second.operator, 0)
        assert await store.indexed_files() == []  # the first one holds it
        await first.operator.release_lease(KNOWLEDGE_LEASE)

        slept: list[float] = []
        passes = asyncio.Event()

        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            passes.set()
            await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(keep_indexed(indexer, second.operator, 90, sleep=sleep))
        await asyncio.wait_for(passes.wait(), 10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert [f.path for f in await store.indexed_files()] == ["deploy.md"]
        assert slept == [90]
        # Released after its pass: the first may take it again.
        assert await first.operator.take_lease(KNOWLEDGE_LEASE) is None


async def test_a_pass_due_while_one_runs_in_the_process_is_left_to_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The console's "Index now" and `maiden run`'s timer share the process's lease: a
    second pass would take it again and give it up under the first."""
    write(tmp_path / "docs", {"deploy.md": DEPLOY})
    async with SQLiteStore(tmp_path / "k.db") as store, \
            Runtime(store, ScriptedProvider([])) as rt:
        indexer = Indexer(store, [source()], tmp_path)
        due: list[asyncio.Task[None]] = []

        def told(line: str) -> None:  # mid-pass: the timer's pass falls due
            due.append(asyncio.create_task(keep_indexed(indexer, rt.operator, 0)))

        assert await rt.operator.take_lease(KNOWLEDGE_LEASE) is None
        with caplog.at_level(logging.INFO, "maiden.knowledge"):
            await indexer.index(progress=told)
            await asyncio.gather(*due)
        assert "a pass is under way in this process; this one is left to it" in caplog.text
        assert [s.changed for s in indexer.status()] == [1]  # the one pass, not a second
        assert not indexer.indexing


def test_the_folder_is_relative_to_the_config(tmp_path: Path) -> None:
    from runtime.serving.knowledge import folder_of

    assert folder_of(source(path="docs/runbooks"), tmp_path) == tmp_path / "docs/runbooks"
    assert folder_of(source(path="/srv/docs"), tmp_path) == Path("/srv/docs")
