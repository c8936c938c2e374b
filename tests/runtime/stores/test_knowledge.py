"""The store contract, knowledge (``runtime/stores/knowledge.py``): a file's passages are
replaced with its record in one write, dropped with it, and found by a full-text search
that ranks the better match first, on every backend."""

from __future__ import annotations

from collections.abc import Callable

from runtime.model.knowledge import IndexedFile, Piece
from tests.runtime.stores.contract import AnyStore

DEPLOY = [Piece("How we deploy: merge, then tag.", section="Deploys"),
          Piece("Roll back with make rollback; the deploy is undone in a minute.",
                section="Deploys > Rollback"),
          Piece("Page the person on call.", section="On call")]


def indexed(path: str, digest: str = "d1", source: str = "runbooks", n: int = 3
            ) -> IndexedFile:
    return IndexedFile(source=source, path=path, digest=digest, passages=n, indexed_at=1.0)


async def test_a_files_passages_are_replaced_with_its_record(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    assert await store.indexed_files() == []
    await store.index_file(indexed("ops/deploy.md"), DEPLOY)
    await store.index_file(indexed("q4.pdf", source="reports", n=1), [Piece("closed at 42",
                                                                           page=3)])
    changed = indexed("ops/deploy.md", digest="d2", n=1)
    await store.index_file(changed, [Piece("Deploys are frozen in December.")])
    async with new_store() as again:
        assert await again.indexed_files("runbooks") == [changed]
        assert [(f.source, f.path) for f in await again.indexed_files()] == [
            ("reports", "q4.pdf"), ("runbooks", "ops/deploy.md")]  # by source, then path
        found = await again.search_passages("deploy rollback frozen", ["runbooks"])
    assert [(p.path, p.n, p.text) for p in found] == [
        ("ops/deploy.md", 0, "Deploys are frozen in December.")]  # nothing of the old file
    (pdf,) = await store.search_passages("closed", ["reports"])
    assert (pdf.page, pdf.section, pdf.cite()) == (3, None, "reports/q4.pdf, page 3")


async def test_the_better_match_comes_first_and_only_the_sources_asked(
        store: AnyStore) -> None:
    await store.index_file(indexed("ops/deploy.md"), DEPLOY)
    await store.index_file(indexed("other.md", source="private", n=1),
                           [Piece("rollback rollback rollback")])
    found = await store.search_passages("How do I roll back a deploy? rollback", ["runbooks"])
    assert found[0].section == "Deploys > Rollback"
    assert {p.source for p in found} == {"runbooks"}
    assert await store.search_passages("rollback", ["runbooks"], limit=1) == found[:1]
    assert await store.search_passages("?!  ", ["runbooks"]) == []
    assert await store.search_passages("rollback", []) == []
    # Nothing of a query's own syntax reaches the store's search: quotes, operators, stars.
    assert await store.search_passages('"rollback" OR NEAR(x) * -- \'; DROP', ["runbooks"])


async def test_a_dropped_file_is_gone_with_its_passages(store: AnyStore) -> None:
    await store.index_file(indexed("ops/deploy.md"), DEPLOY)
    hostile = indexed("../../etc/passwd", source="runbooks", n=1)
    await store.index_file(hostile, [Piece("root rollback")])
    assert await store.drop_indexed_file("runbooks", "ops/deploy.md") is True
    assert await store.drop_indexed_file("runbooks", "ops/deploy.md") is False
    assert [p.path for p in await store.search_passages("rollback", ["runbooks"])] == [
        "../../etc/passwd"]
    assert await store.indexed_files() == [hostile]
