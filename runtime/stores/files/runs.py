"""The files store's runs and threads: a thread's snapshot holds its entries, runs,
transitions and deliveries; pointers find a run, an idempotency key's run and a delivery's
thread. Unlike SQLite, a checkpoint rewrites the whole snapshot: its cost grows with the
thread's length."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from ...errors import NotFound, StaleWrite, StoreError
from ...model.entries import Entry
from ...model.runs import Delivery, Run, RunState, Transition, arriving_after
from ..base import (
    Checkpoint,
    RunStore,
    SpendAsk,
    Spending,
    SpendScope,
    StoreStats,
    ThreadInfo,
    check_thread_id,
)
from ..rows import since_id, spend_key, spend_of
from ..tail import Tail, tail_of
from .core import FilesCore
from .names import thread_file_name
from .snapshot import Snapshot, select_runs

__all__ = ["FilesRuns"]


class FilesRuns(FilesCore, RunStore):
    """The files store's ``RunStore``: threads, runs, checkpoints, transitions, stats."""

    def gone(self) -> str | None:
        return self._identity.gone() if self._disk.is_open else None

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        self._identity.check()  # one stat per accepted message: never into a lost folder
        async with self._create_lock:
            return await self._disk.io(self._create_run, run)

    async def commit(self, checkpoint: Checkpoint) -> None:
        self._identity.check_lost()
        async with self._thread_lock(thread_file_name(checkpoint.thread_id)):
            await self._disk.io(self._commit, checkpoint)

    async def load_entries(self, thread_id: str, *, offset: int = 0,
                           limit: int | None = None) -> list[Entry]:
        check_thread_id(thread_id)
        entries = await self._disk.io(self._load_entries, thread_id)
        return entries[offset:] if limit is None else entries[offset:offset + limit]

    async def load_tail(self, thread_id: str, tokens: int, *, start: int | None = None
                        ) -> Tail:
        # A snapshot is read whole anyway: the tail is cut from it.
        return tail_of(await self.load_entries(thread_id), tokens, start)

    async def thread_length(self, thread_id: str) -> int:
        check_thread_id(thread_id)
        return await self._disk.io(self._length, thread_id)

    async def get_run(self, run_id: str) -> Run:
        found = await self._disk.io(self._find_run, run_id)
        if found is None:
            raise NotFound(f"no run {run_id!r}")
        return found[1]

    async def run_for_key(self, idempotency_key: str) -> Run | None:
        return await self._disk.io(self._run_for_key, idempotency_key)

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if thread_id is not None:
            check_thread_id(thread_id)
        return await self._disk.io(self._list_runs, thread_id, states, limit)

    async def list_threads(self, *, offset: int = 0, limit: int | None = None
                           ) -> list[ThreadInfo]:
        threads = await self._disk.io(self._list_threads)
        return threads[offset:] if limit is None else threads[offset:offset + limit]

    async def stats(self) -> StoreStats:
        runs = await self.list_runs()
        deliveries = await self._disk.io(self._all_deliveries)
        pending = sum(1 for d in deliveries if d.remote_id is None)
        return StoreStats(runs=dict(Counter(r.state for r in runs)),
                          threads=len(await self._disk.io(self._list_threads)),
                          deliveries_pending=pending, deliveries_sent=len(deliveries) - pending)

    async def spent(self, asks: Sequence[SpendAsk]) -> Spending:
        runs = await self.list_runs() if asks else []
        sums = []
        for ask in asks:
            first = since_id(ask.since)
            found = [spend_of(r) for r in runs
                     if r.id >= first and spend_key(r, ask.scope) in ask.keys]
            sums.append((sum(t for t, _ in found), sum(c for _, c in found)))
        return Spending(sums)

    async def index_spend(self, scopes: Collection[SpendScope]) -> None:
        """Nothing to index: ``spent`` reads every run."""

    async def transitions(self, run_id: str) -> list[Transition]:
        return await self._disk.io(self._transitions, run_id)

    # -- synchronous work, run in a worker thread

    def _find_run(self, run_id: str) -> tuple[Snapshot, Run] | None:
        pointer = self._run_pointers.get(run_id)
        if pointer is None:
            return None
        snap = self._threads.load(pointer["thread_id"])
        run = None if snap is None else snap.run(self._threads.path(snap.thread_id), run_id)
        return None if snap is None or run is None else (snap, run)

    def _run_for_key(self, key: str) -> Run | None:
        pointer = self._key_pointers.get(key)
        found = None if pointer is None else self._find_run(pointer["run_id"])
        return None if found is None else found[1]  # a pointer a crash left without its run

    def _create_run(self, run: Run) -> Run:
        with self._disk.lock(self.root / "create.lock"):
            key = run.idempotency_key
            holder = None if key is None else self._run_for_key(key)
            if holder is not None:
                return holder
            if self._find_run(run.id) is not None:
                raise StoreError(f"run {run.id!r} already exists")
            if key is not None:
                self._key_pointers.put(key=key, run_id=run.id)
            self._run_pointers.put(run_id=run.id, thread_id=run.thread_id)
            with self._threads.lock(run.thread_id):
                snap = self._threads.load(run.thread_id) or Snapshot(
                    run.thread_id, created_at=run.created_at, updated_at=run.created_at)
                if run.id in snap.runs:
                    raise StoreError(f"run {run.id!r} already exists")
                # After every run of the thread, in time and in insertion order, whatever
                # the clock of the process that took it.
                at = [r["run"].get("created_at") for r in snap.runs.values()
                      if isinstance(r.get("run"), dict)]
                run = arriving_after(run, max((float(a) for a in at
                                               if isinstance(a, int | float)), default=None))
                inserted = max([self._stamp(), *(r["inserted"] + 1 for r in snap.runs.values()
                                                 if isinstance(r.get("inserted"), int))])
                snap.updated_at = max(snap.updated_at, run.created_at)
                snap.runs[run.id] = {"inserted": inserted, "run": run.model_dump(mode="json")}
                self._threads.save(snap)
        return run

    def _commit(self, cp: Checkpoint) -> None:
        if cp.position is None and cp.entries:
            raise StoreError("a checkpoint with entries needs a position")
        if cp.run is not None and cp.run.thread_id != cp.thread_id:
            raise StoreError(f"run {cp.run.id} belongs to thread {cp.run.thread_id!r}, "
                             f"not {cp.thread_id!r}")
        if cp.position is None and cp.run is None and not cp.transitions and not cp.deliveries:
            return
        path = self._threads.path(cp.thread_id)
        with self._threads.lock(cp.thread_id):
            snap = self._threads.load(cp.thread_id)
            # Every check comes before the first write: a StaleWrite writes nothing.
            if cp.position is not None and (snap is None or len(snap.entries) != cp.position):
                raise StaleWrite(f"thread {cp.thread_id!r} moved past position {cp.position}")
            if cp.run is not None:
                current = None if snap is None else snap.run(path, cp.run.id)
                if current is None or current.version != cp.run.version - 1:
                    raise StaleWrite(f"run {cp.run.id} is not at version {cp.run.version - 1}")
            if snap is None:
                raise NotFound(f"no thread {cp.thread_id!r}")
            entries = snap.new_entries(cp.entries)
            deliveries = self._new_deliveries(snap, cp.deliveries)

            for delivery in deliveries:
                self._delivery_pointers.put(key=delivery.key, thread_id=cp.thread_id)
            snap.entries.extend(entries)
            if cp.run is not None:
                snap.runs[cp.run.id] = {"inserted": snap.runs[cp.run.id].get("inserted"),
                                        "run": cp.run.model_dump(mode="json")}
            snap.transitions.extend(t.model_dump(mode="json") for t in cp.transitions)
            snap.deliveries.extend(d.model_dump(mode="json") for d in deliveries)
            self._threads.save(snap)

    def _new_deliveries(self, snap: Snapshot, deliveries: Sequence[Delivery]) -> list[Delivery]:
        """The deliveries whose key is not taken yet, here or in another thread."""
        taken = {d.get("key") for d in snap.deliveries}
        new = []
        for delivery in deliveries:
            if delivery.key in taken:
                continue
            taken.add(delivery.key)
            elsewhere = self._delivery_thread(delivery.key)
            if elsewhere is not None and elsewhere != snap.thread_id:
                other = self._threads.load(elsewhere)
                if other is not None and any(d.get("key") == delivery.key
                                             for d in other.deliveries):
                    continue
            new.append(delivery)
        return new

    def _length(self, thread_id: str) -> int:
        snap = self._threads.load(thread_id)
        return 0 if snap is None else len(snap.entries)

    def _load_entries(self, thread_id: str) -> list[Entry]:
        snap = self._threads.load(thread_id)
        return [] if snap is None else snap.parsed_entries(self._threads.path(thread_id))

    def _list_runs(
        self, thread_id: str | None, states: Sequence[RunState] | None, limit: int | None
    ) -> list[Run]:
        if thread_id is not None:
            snap = self._threads.load(thread_id)
            snaps = [] if snap is None else [(self._threads.path(thread_id), snap)]
        else:
            snaps = list(self._threads.all())
        return select_runs([pair for path, snap in snaps for pair in snap.ordered_runs(path)],
                           states, limit)

    def _list_threads(self) -> list[ThreadInfo]:
        infos = [snap.info(path) for path, snap in self._threads.all()]
        infos.sort(key=lambda info: (-info.updated_at, info.id))
        return infos

    def _transitions(self, run_id: str) -> list[Transition]:
        found = self._find_run(run_id)
        if found is None:
            return []
        snap, _ = found
        return snap.run_transitions(self._threads.path(snap.thread_id), run_id)
