"""The files store's format: a thread's snapshot (and ``store.json``), parsed and checked.

A snapshot is one JSON object per thread (format ``FORMAT``) holding its entries,
runs, transitions and delivery records. Records stay raw JSON until someone asks
for them, so a checkpoint that appends a few entries does not revalidate the rest.
Anything unreadable is ``CorruptStore`` naming the file. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from ...errors import CorruptStore, NotFound, StaleWrite, StoreError
from ...model.entries import Entry, ToolResult
from ...model.runs import DELIVERY, Delivery, Run, RunState, Transition
from ..base import ENTRIES, ThreadInfo

__all__ = ["FORMAT", "Snapshot", "check_marker", "marker", "parse_snapshot", "select_runs"]

FORMAT = 1
"""The version of the layout, in ``store.json`` and in every snapshot."""



def marker(store_id: str) -> bytes:
    """The content of ``store.json`` for the store of that identity (a random id, written
    once: ``FileIdentity`` reads it again if the file changes)."""
    return json.dumps({"format": FORMAT, "kind": "maiden-files", "id": store_id}).encode()

M = TypeVar("M", bound=BaseModel)


@dataclass
class Snapshot:
    """A thread's file, parsed. Entries and records stay raw JSON until someone asks for them.

    Methods that parse records take the file's ``path`` only to name it in ``CorruptStore``.
    """

    thread_id: str
    created_at: float
    updated_at: float
    entries: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"inserted", "run"}
    transitions: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[dict[str, Any]] = field(default_factory=list)

    def dump(self) -> bytes:
        # ensure_ascii: any str survives the round trip, lone surrogates included.
        return json.dumps({
            "format": FORMAT,
            "thread_id": self.thread_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "entries": self.entries,
            "runs": self.runs,
            "transitions": self.transitions,
            "deliveries": self.deliveries,
        }, separators=(",", ":")).encode("ascii")

    def parsed_entries(self, path: Path) -> list[Entry]:
        try:
            return ENTRIES.validate_python(self.entries)
        except ValueError as exc:
            raise CorruptStore(f"{path}: unreadable entry: {exc}") from exc

    def run(self, path: Path, run_id: str) -> Run | None:
        stored = self.runs.get(run_id)
        return None if stored is None else _validate(path, Run, stored.get("run"))

    def ordered_runs(self, path: Path) -> list[tuple[tuple[float, int], Run]]:
        """``((created_at, inserted), run)`` pairs: the order SQLite's rowid gives."""
        pairs = []
        for stored in self.runs.values():
            run = _validate(path, Run, stored.get("run"))
            inserted = stored.get("inserted")
            if not isinstance(inserted, int):
                raise CorruptStore(f"{path}: run {run.id} has no insertion stamp")
            pairs.append(((run.created_at, inserted), run))
        return pairs

    def info(self, path: Path) -> ThreadInfo:
        runs = self.ordered_runs(path)
        last = max(runs, key=lambda pair: pair[0])[1].state if runs else None
        return ThreadInfo(id=self.thread_id, length=len(self.entries),
                          created_at=self.created_at, updated_at=self.updated_at,
                          runs=len(runs), last_state=last)

    def parsed_deliveries(self, path: Path) -> list[Delivery]:
        return [_parse_delivery(path, raw) for raw in self.deliveries]

    def run_transitions(self, path: Path, run_id: str) -> list[Transition]:
        return [_validate(path, Transition, raw) for raw in self.transitions
                if raw.get("run_id") == run_id]

    def new_entries(self, entries: Sequence[Entry]) -> list[dict[str, Any]]:
        """The entries as JSON; ``StaleWrite`` if a tool call already has its result."""
        recorded = {(e.get("run_id"), e.get("tool_call_id"))
                    for e in self.entries if e.get("kind") == "tool_result"}
        rows = []
        for entry in entries:
            if isinstance(entry, ToolResult):
                call = (entry.run_id, entry.tool_call_id)
                if call in recorded:
                    raise StaleWrite(f"a result for tool call {entry.tool_call_id!r} of run "
                                     f"{entry.run_id} is already recorded")
                recorded.add(call)
            rows.append(entry.model_dump(mode="json"))
        return rows

    def update_pending(self, path: Path, key: str,
                       change: Callable[[Delivery], dict[str, Any]]) -> tuple[Delivery, bool]:
        """Change delivery ``key`` while it has not been sent (``change`` says how; ``{}``:
        not at all): the delivery as it stands after, and whether it changed; ``NotFound``
        if absent."""
        for i, raw in enumerate(self.deliveries):
            if raw.get("key") == key:
                delivery = _parse_delivery(path, raw)
                if delivery.remote_id is not None or not (update := change(delivery)):
                    return delivery, False
                changed = delivery.model_copy(update=update)
                self.deliveries[i] = changed.model_dump(mode="json")
                return changed, True
        raise NotFound(f"no delivery {key!r}")


def parse_snapshot(path: Path, data: bytes, thread_id: str | None) -> Snapshot:
    """The snapshot in ``data``; with ``thread_id``, it must be that thread's."""
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"not a format {FORMAT} thread snapshot")
        snap = Snapshot(
            thread_id=raw["thread_id"],
            created_at=float(raw["created_at"]),
            updated_at=float(raw["updated_at"]),
            entries=raw["entries"],
            runs=raw["runs"],
            transitions=raw["transitions"],
            deliveries=raw["deliveries"],
        )
        if not isinstance(snap.thread_id, str):
            raise ValueError("thread_id is not a string")
        if not isinstance(snap.runs, dict) or not _objects(snap.runs.values()):
            raise ValueError("runs is not an object of objects")
        for records in (snap.entries, snap.transitions, snap.deliveries):
            if not isinstance(records, list) or not _objects(records):
                raise ValueError("entries, transitions and deliveries must be lists of objects")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptStore(f"{path}: unreadable thread snapshot: {exc}") from exc
    if thread_id is not None and snap.thread_id != thread_id:
        raise CorruptStore(f"{path} holds thread {snap.thread_id!r}, not {thread_id!r}")
    return snap


def check_marker(path: Path, data: bytes) -> str | None:
    """``store.json`` must name the format this code reads (``marker`` is what a new store
    gets); the store's identity, or None if it has none yet (made before identities)."""
    try:
        found = json.loads(data)
        format_ = found.get("format")
    except (ValueError, AttributeError) as exc:
        raise CorruptStore(f"{path}: unreadable: {exc}") from exc
    if format_ != FORMAT:
        raise StoreError(f"{path.parent} has format {format_!r}; this maiden reads format {FORMAT}")
    store_id = found.get("id")
    return store_id if isinstance(store_id, str) else None


def select_runs(
    pairs: list[tuple[tuple[float, int], Run]], states: Sequence[RunState] | None,
    limit: int | None,
) -> list[Run]:
    """``ordered_runs`` pairs of any snapshots, as ``list_runs`` answers: SQLite's order."""
    if states is not None:
        wanted = {RunState(state) for state in states}
        pairs = [(order, run) for order, run in pairs if run.state in wanted]
    pairs = sorted(pairs, key=lambda pair: pair[0])
    if limit is not None and limit >= 0:  # SQLite reads a negative LIMIT as none
        pairs = pairs[max(0, len(pairs) - limit):]
    return [run for _, run in pairs]


def _validate(path: Path, model: type[M], raw: Any) -> M:
    try:
        return model.model_validate(raw)
    except ValueError as exc:
        raise CorruptStore(f"{path}: unreadable {model.__name__}: {exc}") from exc


def _parse_delivery(path: Path, raw: Any) -> Delivery:
    try:
        return DELIVERY.validate_python(raw)
    except ValueError as exc:
        raise CorruptStore(f"{path}: unreadable delivery: {exc}") from exc


def _objects(records: Iterable[object]) -> bool:
    return all(isinstance(record, dict) for record in records)
