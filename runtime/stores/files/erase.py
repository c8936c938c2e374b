"""The files store's erasure of a thread (``erasure``), made atomic the store's own way.

The snapshot is the thread, so its going is the erasure's commit point: it is renamed, at
once and durably, to ``threads/{stem}.erasing``, which no reader looks at (from then on the
thread, its runs and its records are found nowhere). Then what hangs off it is removed, its
folders flushed: its pointers, the votes on its runs, its notes, the control requests about
its runs, the memories it sourced or that are kept for it (found until then: they are
files of their own), the blobs no other thread names and its lock file; the renamed
snapshot last. A crash in between leaves that file, which holds everything needed to
finish: the next open of the store, or the next erasure of the thread, finishes it. Its
expired lease is dropped with the erasure (as every write of ``leases.json`` drops the
expired ones).
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import CorruptStore, StaleWrite
from ...model.requests import ControlRequest
from ...model.runs import TERMINAL
from ..base import check_thread_id
from ..erasure import Erased, ThreadEraser, named_digests, stop_scope, thread_scope
from .core import FilesCore
from .fs import read_or_none
from .leases import change_leases
from .memories import memory_files_of_thread
from .names import key_file_name, run_file_name, thread_file_name, thread_stem
from .snapshot import Snapshot, parse_snapshot

__all__ = ["FilesErasure"]

ERASING = ".erasing"


class FilesErasure(FilesCore, ThreadEraser):
    """The files store's ``ThreadEraser``."""

    async def delete_thread(self, thread_id: str) -> Erased:
        check_thread_id(thread_id)
        self._identity.check_lost()
        async with self._create_lock, self._thread_lock(thread_file_name(thread_id)):
            return await self._disk.io(self._delete_thread, thread_id)

    # -- synchronous work, run in a worker thread

    def _open(self) -> None:
        super()._open()
        for path in sorted(self._threads.folder.glob(f"*{ERASING}")):
            with self._disk.lock(path.with_suffix(".lock")):  # the thread's lock
                self._finish(path)  # an erasure a crash cut short

    def _delete_thread(self, thread_id: str) -> Erased:
        # create.lock: no run of the thread is made meanwhile (its pointers, its snapshot).
        with self._disk.lock(self.root / "create.lock"), self._threads.lock(thread_id):
            leftover = self._erasing_path(thread_id)
            if leftover.exists():
                self._finish(leftover)
            path = self._threads.path(thread_id)
            snap = self._threads.load(thread_id)
            if snap is None:
                return Erased(thread_id)
            runs = [run for _, run in snap.ordered_runs(path)]
            going = [run.id for run in runs if run.state not in TERMINAL]
            if going:
                raise StaleWrite(f"thread {thread_id!r} has a run that has not ended "
                                 f"({going[0]}): cancel it first")
            votes, notes = self._counts(snap)
            memories = len(memory_files_of_thread(self._folder("memories"), thread_id)) // 2
            self._disk.rename(path, leftover)  # the commit point
            blobs = self._finish(leftover, snap)
        return Erased(thread_id, entries=len(snap.entries), runs=len(runs),
                      deliveries=len(snap.deliveries), votes=votes, notes=notes, blobs=blobs,
                      memories=memories)

    def _erasing_path(self, thread_id: str) -> Path:
        return self._threads.folder / f"{thread_stem(thread_id)}{ERASING}"

    def _finish(self, erasing: Path, snap: Snapshot | None = None) -> int:
        """Remove what hangs off the erased snapshot at ``erasing``, then the snapshot; how
        many blobs went."""
        if snap is None:
            data = read_or_none(erasing)
            if data is None:
                return 0
            snap = parse_snapshot(erasing, data, None)
        ids = list(snap.runs)
        keys = [stored["run"].get("idempotency_key") for stored in snap.runs.values()
                if isinstance(stored.get("run"), dict)]
        gone: list[Path] = []
        for run_id in ids:
            gone.append(self._run_pointers.folder / run_file_name(run_id))
            votes = self._folder("feedback") / f"{run_file_name(run_id)}.json"
            gone += [votes, votes.with_suffix(".lock")]
        for key in keys:
            pointer = self._key_pointers.get(key) if isinstance(key, str) else None
            if pointer is not None and pointer["run_id"] in snap.runs:
                gone.append(self._key_pointers.folder / key_file_name(key))
        for raw in snap.deliveries:
            key = raw.get("key")
            if isinstance(key, str) and self._delivery_thread(key) == snap.thread_id:
                gone.append(self._delivery_pointers.folder / key_file_name(key))
        for scope in (thread_scope(snap.thread_id), *map(stop_scope, ids)):
            notes = self._folder("notes") / key_file_name(scope)
            gone += [notes, notes.with_suffix(".lock")]
        gone += self._requests_about(set(ids))
        gone += memory_files_of_thread(self._folder("memories"), snap.thread_id)
        named = named_digests([snap.dump().decode("ascii")])
        unnamed = sorted(named - self._named()) if named else []
        for digest in unnamed:
            blob = self._folder("blobs") / digest
            gone += [blob, blob.with_suffix(".json")]
        gone.append(self._threads.folder / f"{thread_stem(snap.thread_id)}.lock")
        self._disk.remove(gone)
        change_leases(self._disk, lambda leases, now: None)  # the expired ones go
        self._disk.remove([erasing])
        return len(unnamed)

    def _counts(self, snap: Snapshot) -> tuple[int, int]:
        """The votes on the thread's runs and the notes of its scopes, as stored now."""
        votes = notes = 0
        for run_id in snap.runs:
            data = read_or_none(self._folder("feedback") / f"{run_file_name(run_id)}.json")
            votes += len(json.loads(data).get("votes", {})) if data else 0
        for scope in (thread_scope(snap.thread_id), *map(stop_scope, snap.runs)):
            data = read_or_none(self._folder("notes") / key_file_name(scope))
            notes += len(json.loads(data).get("notes", {})) if data else 0
        return votes, notes

    def _requests_about(self, run_ids: set[str]) -> list[Path]:
        """The files of the control requests about these runs."""
        found = []
        for path in sorted(self._folder("requests").glob("*.json")):
            data = read_or_none(path)
            if data is None:
                continue
            try:
                about = ControlRequest.model_validate_json(data).run_id
            except ValueError as exc:
                raise CorruptStore(f"{path}: {exc}") from exc
            if about in run_ids:
                found += [path, path.with_suffix(".lock")]
        return found

    def _named(self) -> set[str]:
        """The blobs every thread left names (snapshots are compact JSON, read raw)."""
        texts = []
        for path in self._threads.folder.glob("*.json"):
            data = read_or_none(path)
            if data is not None:
                texts.append(data.decode("ascii", "replace"))
        return named_digests(texts)
