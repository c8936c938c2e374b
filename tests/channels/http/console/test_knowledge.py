"""The console's Knowledge page, on the real server over a real store and folder: each
``[[knowledge]]`` source with its folder, the files and passages the store holds of it and
when it was last indexed, and this process's last pass (its changes, its error: a folder
not there); "Index now" (the ``operate`` right, the session's CSRF token) starts a pass in
the background, one at a time; with no source configured, the page says so."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from runtime import (
    AgentConfig,
    EchoProvider,
    Indexer,
    KnowledgeConfig,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
)
from tests.http_helpers import served, tokens

PEOPLE = tokens(("alice", "tok-alice-operator"), ("bob", "tok-bob-talker", ["talk"]))
DEPLOY = "# Deploys\n\nMerge, then tag.\n\n## Rollback\n\nRun make rollback.\n"
ONCALL = "# On call\n\nPage the secondary after 15 minutes.\n"


@asynccontextmanager
async def console(tmp_path: Path, sources: list[KnowledgeConfig]
                  ) -> AsyncIterator[tuple[Indexer, dict[str, httpx.AsyncClient]]]:
    """The console over a runtime and an indexer sharing one store, and a browser signed in
    as alice (every right) and as bob (``talk`` only)."""
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry(()), agent=AgentConfig(),
                    settings=RuntimeConfig(poll_interval_s=0.1)) as rt:
        indexer = Indexer(store, sources, tmp_path)
        async with served(rt, credentials=PEOPLE, knowledge=indexer) as (api, _):
            clients = {}
            for name, token in (("alice", "tok-alice-operator"), ("bob", "tok-bob-talker")):
                client = httpx.AsyncClient(base_url=str(api.base_url), timeout=10.0)
                assert (await client.post("/sign-in", data={"token": token})).status_code \
                    == 303
                clients[name] = client
            try:
                yield indexer, clients
            finally:
                for client in clients.values():
                    await client.aclose()


def source(name: str, path: str) -> KnowledgeConfig:
    return KnowledgeConfig.model_validate({"name": name, "path": path})


def row(html: str, name: str) -> str:
    found = re.search(rf'<tr data-source="{name}">(.*?)</tr>', html, re.S)
    assert found, html
    return " ".join(found[1].split())


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html[:500]
    return found[1]


async def test_index_now_fills_the_page_with_each_sources_files_and_passages(
        tmp_path: Path) -> None:
    (tmp_path / "docs" / "ops").mkdir(parents=True)
    (tmp_path / "docs" / "deploy.md").write_text(DEPLOY)
    (tmp_path / "docs" / "ops" / "oncall.md").write_text(ONCALL)
    sources = [source("runbooks", "docs"), source("wiki", "not-mounted"),
               KnowledgeConfig(name="ops-files", shared_in=["slack:C0OPS"])]
    async with console(tmp_path, sources) as (indexer, who):
        before = await who["alice"].get("/knowledge")
        assert before.status_code == 200
        assert '<a href="/knowledge" aria-current="page">Knowledge</a>' in before.text
        assert "<td>0</td> <td>0</td>" in row(before.text, "runbooks")
        assert "no pass yet" in row(before.text, "runbooks")
        assert f"<code>{tmp_path / 'docs'}</code>" in row(before.text, "runbooks")
        assert "shared files only" in row(before.text, "ops-files")  # no folder to show

        bob = await who["bob"].get("/knowledge")  # sees the sources, may not index
        assert bob.status_code == 200 and 'data-source="runbooks"' in bob.text
        assert "Index now" not in bob.text
        refused = await who["bob"].post("/console/knowledge/index",
                                        data={"csrf": csrf_of(bob.text)})
        assert refused.status_code == 403 and "operate" in refused.text
        stale = await who["alice"].post("/console/knowledge/index", data={"csrf": "0"})
        assert stale.status_code == 403
        assert indexer.status()[0].last_pass_at is None  # neither started a pass

        started = await who["alice"].post("/console/knowledge/index",
                                          data={"csrf": csrf_of(before.text)})
        assert started.status_code == 303
        assert started.headers["location"] == "/knowledge?started=1"
        async with asyncio.timeout(10):
            while indexer.status()[-1].last_pass_at is None:  # noqa: ASYNC110 (the page's task)
                await asyncio.sleep(0.05)
        runbooks = (await indexer.stored())[0]
        assert runbooks.files == 2 and runbooks.passages >= 3

        after = (await who["alice"].get("/knowledge")).text
        shown = row(after, "runbooks")
        assert f"<td>2</td> <td>{runbooks.passages}</td>" in shown
        assert "2 changed, 0 removed" in shown and "UTC" in shown
        assert 'class="error"' not in shown
        missing = row(after, "wiki")
        assert "<td>0</td> <td>0</td>" in missing
        assert "folder not found" in missing and 'class="error"' in missing


async def test_without_sources_the_page_says_none_are_configured(tmp_path: Path) -> None:
    async with console(tmp_path, []) as (_, who):
        page = await who["alice"].get("/knowledge")
        assert page.status_code == 200
        assert "No knowledge sources configured" in page.text
        assert "<table" not in page.text and "Index now" not in page.text
        asked = await who["alice"].post("/console/knowledge/index",
                                        data={"csrf": csrf_of(page.text)})
        assert asked.status_code == 404
    async with served_alone(tmp_path) as client:  # a console given no indexer at all
        page = await client.get("/knowledge")
        assert page.status_code == 200 and "No knowledge sources configured" in page.text


@asynccontextmanager
async def served_alone(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with SQLiteStore(tmp_path / "alone.db") as store, \
            Runtime(store, EchoProvider(), ToolRegistry(()), agent=AgentConfig(),
                    settings=RuntimeConfig(poll_interval_s=0.1)) as rt, \
            served(rt) as (api, _):
        yield api


async def test_signed_out_the_page_asks_to_sign_in(tmp_path: Path) -> None:
    async with console(tmp_path, [source("runbooks", "docs")]) as (_, who):
        signed_out = httpx.AsyncClient(base_url=who["alice"].base_url, timeout=10.0)
        async with signed_out:
            page = await signed_out.get("/knowledge")
            assert page.status_code == 303
            assert page.headers["location"] == "/sign-in?next=%2Fknowledge"
            asked = await signed_out.post("/console/knowledge/index", data={"csrf": "0"})
            assert asked.status_code == 401
