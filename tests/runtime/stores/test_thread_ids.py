"""The store contract, thread ids (DESIGN §3): any string is a thread id, and hostile ones
never share a history, on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import InvalidThreadId
from runtime.model.entries import UserMessage
from runtime.stores.base import Checkpoint
from runtime.stores.files import thread_file_name
from tests.runtime.stores.contract import CONTROL_IDS, HOSTILE_IDS, AnyStore, make_run

# -- thread ids


async def test_hostile_thread_ids_never_share_history(
    store: AnyStore, backend: str, tmp_path: Path
) -> None:
    runs = {}
    for thread_id in HOSTILE_IDS:
        runs[thread_id] = await store.create_run(make_run(thread_id, text=thread_id))
        await store.commit(Checkpoint(thread_id, 0, [UserMessage(run_id=runs[thread_id].id,
                                                                 text=f"<{thread_id}>")]))
    for thread_id in HOSTILE_IDS:
        (entry,) = await store.load_entries(thread_id)
        assert isinstance(entry, UserMessage)
        assert entry.text == f"<{thread_id}>"
        assert (await store.list_runs(thread_id=thread_id)) == [runs[thread_id]]
    infos = await store.list_threads()
    assert sorted(info.id for info in infos) == sorted(HOSTILE_IDS)
    assert all(info.length == 1 for info in infos)
    if backend == "files":
        root = (tmp_path / "files").resolve()
        for path in root.rglob("*"):
            assert path.resolve().is_relative_to(root)
            assert path.parent.resolve() in {root, *(root / d for d in
                                                     ("threads", "runs", "idempotency",
                                                      "deliveries"))}
        names = {thread_file_name(thread_id) for thread_id in HOSTILE_IDS}
        assert len(names) == len(HOSTILE_IDS)
        assert len({name.lower() for name in names}) == len(HOSTILE_IDS)
        on_disk = {p.stem for p in (root / "threads").glob("*.json")}
        assert on_disk == names


async def test_control_characters_make_an_invalid_thread_id(store: AnyStore) -> None:
    for thread_id in CONTROL_IDS:
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.create_run(make_run(thread_id))
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.load_entries(thread_id)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.load_tail(thread_id, 100)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.thread_length(thread_id)
        with pytest.raises(InvalidThreadId, match="control characters"):
            await store.list_runs(thread_id=thread_id)
    assert await store.list_threads() == []


async def test_lone_surrogate_is_an_invalid_thread_id(store: AnyStore) -> None:
    with pytest.raises(InvalidThreadId):
        await store.create_run(make_run("a\ud800b"))
    with pytest.raises(InvalidThreadId):
        await store.load_entries("\udfff")
    assert await store.list_threads() == []
