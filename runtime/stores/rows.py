"""What the two SQL stores (SQLite and PostgreSQL) share: their rows' formats (an entry's,
a run's, a delivery's, a thread's listing, a run's transitions), and the runs whose rows
were written or read last. Entry rows are validated in one call per read, not one per
row; a row that does not validate is found, and named, only on that error path."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import CorruptStore, NotFound, StaleWrite
from ..model.entries import ENTRY, SUMMARY, Entry, Notice, ToolResult
from ..model.routing import place_key
from ..model.runs import (
    DELIVERY,
    NOT_POSTED,
    TERMINAL,
    Delivery,
    FileDelivery,
    Run,
    RunState,
    StreamState,
    Transition,
)
from ..model.tokens import entry_tokens
from .base import ENTRIES, Checkpoint, SpendAsk, SpendScope, ThreadInfo

__all__ = ["UNCLAIMED", "activity", "claim_change", "deliveries_query", "entry_row",
           "parse_entries", "parse_run", "pending_changed", "pending_now", "positioned_rows",
           "run_json", "thread_infos", "transitions_of"]


def entry_row(thread_id: str, seq: int, entry: Entry) -> tuple[Any, ...]:
    """The entry's row; its last field is the entry's own tokens (``commit_rows`` makes it
    the thread's running sum)."""
    call_id = entry.tool_call_id if isinstance(entry, ToolResult) else None
    kind = SUMMARY if isinstance(entry, Notice) and entry.code == SUMMARY else entry.kind
    return (thread_id, seq, entry.run_id, kind, call_id, entry.model_dump_json(),
            entry_tokens(entry))


def positioned_rows(thread_id: str, position: int, entries: Sequence[tuple[Any, ...]],
                    last: Sequence[Any] | None, known: bool) -> list[tuple[Any, ...]]:
    """The entry rows to append at ``position``, each ending with the thread's running token
    sum (it ends with the entry's own tokens here), given the thread's ``last`` row (its seq
    and sum, or None) and whether the thread is ``known``; ``StaleWrite`` if the thread is
    unknown or has moved past ``position``."""
    seq, tokens = (last[0], last[1]) if last is not None else (-1, 0)
    if not known or seq + 1 != position:
        raise StaleWrite(f"thread {thread_id!r} moved past position {position}")
    rows = []
    for row in entries:
        tokens += row[-1]
        rows.append((*row[:-1], tokens))
    return rows


def run_json(run: Run) -> str:
    """A run's row: the fields set on it (made with a value, changed since, or read from a
    row that had them): most are left at their defaults, and leaving those out takes a
    third of the bytes (telling set fields is cheaper than comparing each with its
    default). A read of that row in this process (``parse_run``) gets ``run`` back
    without parsing."""
    data = run.model_dump_json(exclude_unset=True)
    _remember(data, run)
    return data


def since_id(since: float) -> str:
    """The lowest run id of a run created at ``since`` (run ids begin with their time)."""
    return f"{max(int(since * 1000), 0):012x}"


SPEND_COLUMNS = {"agent": "spend_agent", "user": "spend_user", "place": "spend_place"}
"""The runs' column of each spend scope (SQLite and PostgreSQL alike)."""


def spend_sql(asks: Sequence[SpendAsk], mark: Callable[[int], str], also: str = ""
              ) -> tuple[str, list[Any]]:
    """One statement answering every ask, a row each (its index, tokens, cost, then
    ``also``: an expression each row carries), and its parameters; ``mark(n)`` is the
    n-th parameter's placeholder (``?``, ``$n``)."""
    parts: list[str] = []
    params: list[Any] = []
    extra = f", {also}" if also else ""
    for i, ask in enumerate(asks):
        marks = [mark(len(params) + k + 1) for k in range(len(ask.keys) + 1)]
        parts.append(f"SELECT {i}, coalesce(sum(spend_tokens), 0), coalesce(sum(spend_cost), "
                     f"0.0){extra} FROM runs WHERE {SPEND_COLUMNS[ask.scope]} IN "
                     f"({', '.join(marks[:-1])}) AND id >= {marks[-1]}")
        params += [*ask.keys, since_id(ask.since)]
    return " UNION ALL ".join(parts), params


def spend_sums(rows: Sequence[Sequence[Any]], count: int) -> list[tuple[int, float]]:
    """``spend_sql``'s rows, in the asks' order."""
    sums = {int(row[0]): (int(row[1]), float(row[2])) for row in rows}
    return [sums.get(i, (0, 0.0)) for i in range(count)]


def spend_keys(run: Run) -> tuple[str, str | None, str]:
    """Whose a run's spend is, as spend caps ask: its agent (empty: the default), its
    person (None: nobody said), its place key (``routing.place_key``)."""
    return run.agent, run.origin.user, place_key(run.origin)


def spend_key(run: Run, scope: SpendScope) -> str | None:
    """One of ``spend_keys``: the run's key in ``scope``."""
    return spend_keys(run)[("agent", "user", "place").index(scope)]


def spend_of(run: Run) -> tuple[int, float]:
    """What a run has spent so far: tokens (input, output, cached), USD."""
    return run.usage.total_tokens, run.cost_usd


def parse_run(data: str) -> Run:
    known = _RUNS.get(data)
    if known is not None:
        return known
    try:
        run = Run.model_validate_json(data)
    except ValueError as exc:
        raise CorruptStore(f"unreadable run row: {exc}") from exc
    _remember(data, run)
    return run


_RUNS: dict[str, Run] = {}
"""Run rows written or read last in this process, and their (frozen) runs: a run's row
is read soon after it is written (the worker finds the new run, the driver reads it
again), and a row's text decides its run. Plain dict operations only: the reader's
thread parses too."""
_RUNS_KEPT = 256


def _remember(data: str, run: Run) -> None:
    if len(_RUNS) >= _RUNS_KEPT:
        _RUNS.clear()
    _RUNS[data] = run


def activity(cp: Checkpoint) -> bool | None:
    """The run's ``active`` to write: None where its transitions show it unchanged (none, or
    a run moving between unfinished states, or between ended ones)."""
    assert cp.run is not None
    steps = [t for t in cp.transitions if t.run_id == cp.run.id]
    if all((t.source in TERMINAL) == (t.target in TERMINAL) for t in steps):
        return None
    return not cp.run.terminal


def pending_changed(key: str, data: str | None,
                    change: Callable[[Delivery], dict[str, Any]]) -> Delivery | None:
    """The stored delivery ``data`` as ``change`` makes it, or None if it is left as it is:
    sent already (a sent one is left alone), or ``change`` asks for nothing (``{}``);
    ``NotFound`` if there is none."""
    if data is None:
        raise NotFound(f"no delivery {key!r}")
    delivery = DELIVERY.validate_json(data)
    if delivery.remote_id is not None or not (update := change(delivery)):
        return None
    return delivery.model_copy(update=update)


def pending_now(key: str, data: str | None, changed: Delivery | None) -> Delivery:
    """The delivery as it stands after ``pending_changed``: ``changed``, else as stored."""
    if changed is not None:
        return changed
    assert data is not None  # pending_changed raised NotFound
    return DELIVERY.validate_json(data)


def claim_change(sender: str, at: float, ttl_s: float, steal_from: str | None
                 ) -> Callable[[Delivery], dict[str, Any]]:
    """``claim_delivery``'s change: the record becomes ``sender``'s unless another process
    claimed it less than ``ttl_s`` ago (by ``at``) and is not ``steal_from``; one taken
    over from another process counts a failed attempt."""
    def change(delivery: Delivery) -> dict[str, Any]:
        other = delivery.sender
        if other in (None, sender):
            return {"sender": sender, "sending_since": at}
        if other != steal_from and delivery.sending_since is not None \
                and at - delivery.sending_since < ttl_s:
            return {}
        # Taken over: the other's send never said how it ended, so it counts as failed
        # (whoever sends it now reconciles first: it may have been posted).
        return {"sender": sender, "sending_since": at,
                "attempts_failed": delivery.attempts_failed + 1,
                "last_error": f"{other} claimed it and did not finish sending it"}
    return change


UNCLAIMED: dict[str, Any] = {"sender": None, "sending_since": None}
"""What a failed send leaves of its claim: nothing (any process may try it again at once)."""


def stream_change(state: StreamState, remote_ids: Sequence[str], at: float
                  ) -> Callable[[Delivery], dict[str, Any]]:
    """``stream_progress``'s change to a stream delivery: ``finished`` sets ``remote_id``
    (the ids, or ``NOT_POSTED`` when it opened none) and ``delivered_at``."""
    changes: dict[str, Any] = {"state": state, "remote_ids": tuple(remote_ids)}
    if state == "finished":
        changes |= {"remote_id": ",".join(remote_ids) or NOT_POSTED, "delivered_at": at}
    return lambda _: changes


def upload_change(key: str, upload_id: str) -> Callable[[Delivery], dict[str, Any]]:
    """``upload_started``'s change to a file delivery; ``NotFound`` for another kind."""
    def change(delivery: Delivery) -> dict[str, Any]:
        if not isinstance(delivery, FileDelivery):
            raise NotFound(f"no file delivery {key!r}")
        return {"upload_id": upload_id}
    return change


def deliveries_query(run_id: str | None, pending: bool | None, thread_id: str | None = None,
                     *, param: str, order: str, thread: str) -> tuple[str, list[Any]]:
    """``deliveries``'s query (in the order the records were written) and its parameters:
    ``param`` is the placeholder style (``?``, or ``$`` for numbered ones), ``order`` the
    column of insertion order, ``thread`` the expression of a row's thread id (read from its
    JSON: the records not sent yet, which the pending index finds, are few).

    Not by ``created_at``: that is the writing process's clock, and a clock stepped back
    (or another replica's, behind) would put a thread's newer reply before an older one
    still waiting, and post it first (chaos, seed 7)."""
    where: list[str] = []
    params: list[Any] = []

    def bound(value: Any) -> str:
        params.append(value)
        return "?" if param == "?" else f"${len(params)}"

    if run_id is not None:
        where.append(f"run_id = {bound(run_id)}")
    if pending is not None:
        where.append("remote_id IS NULL" if pending else "remote_id IS NOT NULL")
    if thread_id is not None:
        where.append(f"{thread} = {bound(thread_id)}")
    sql = "SELECT data FROM deliveries"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return f"{sql} ORDER BY {order}", params


def transitions_of(run_id: str, data: str | None) -> list[Transition]:
    steps = json.loads(data) if data is not None else []
    return [Transition(run_id=run_id, source=source, target=target, reason=reason, at=at)
            for source, target, reason, at in steps]


def thread_infos(rows: Sequence[Sequence[Any]]) -> list[ThreadInfo]:
    """``ThreadInfo``s from rows of (id, length, created_at, updated_at, runs, last state)."""
    return [ThreadInfo(id=r[0], length=r[1], created_at=r[2], updated_at=r[3], runs=r[4],
                       last_state=RunState(r[5]) if r[5] else None) for r in rows]


def parse_entries(thread_id: str, first: int, rows: list[Any]) -> list[Entry]:
    """Entry rows, validated in one call (far cheaper than one per row)."""
    try:
        with no_cycle_collection(len(rows) > 1000):
            return ENTRIES.validate_json("[" + ",".join(r[0] for r in rows) + "]")
    except ValueError as exc:
        raise unreadable_entry(thread_id, first, rows) from exc


def unreadable_entry(thread_id: str, first: int, rows: list[Any]) -> CorruptStore:
    """Which row of the thread cannot be read, and why, in one line (rows are checked one by
    one only here, on the error path)."""
    for seq, row in enumerate(rows, first):
        try:
            ENTRY.validate_json(row[0])
        except ValueError as exc:
            errors = exc.errors() if hasattr(exc, "errors") else []
            why = errors[0]["msg"] if errors else str(exc).splitlines()[0]
            return CorruptStore(f"thread {thread_id!r} has an unreadable entry at row {seq}: "
                                f"{why}")
    return CorruptStore(f"thread {thread_id!r} has an unreadable entry")


@contextmanager
def no_cycle_collection(pause: bool) -> Iterator[None]:
    """Hold the cycle collector off while a long thread is validated.

    The validation allocates tens of thousands of objects, none of them garbage, and
    the collector would otherwise scan the young heap for every 700 of them and the
    whole heap every few hundred thousand: that doubled a cold load of 10,000 entries.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
