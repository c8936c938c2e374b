"""What each model request holds: the thread as the model sees it, cut to the context window,
with a summary or a notice standing for what the window leaves out.

``Prompts`` keeps the per-thread state that makes this cheap and steady turn after turn:
the tidiness check and the summary scan (incremental: threads only grow) and the window's
cut (held still for the providers' prompt caches). The driver asks it for a request, and,
with ``compaction = "summary"``, for what falls out and the request that summarises it.

The two steps of the loop that are about the window sit here too: ``load`` reads only
the tail of a thread the window needs, and ``compact`` stores the summary of what falls
out of it (after the memory flush, ``flush``, has kept what is worth keeping of it).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ProviderError
from ..model.budget import Prices
from ..model.durability import Write
from ..model.entries import Entry, Notice, ToolResult, Usage, UserMessage
from ..model.runs import Run, RunState
from ..model.toolspec import ToolSpec
from ..providers.base import ModelRequest, Provider
from ..stores.base import Store
from ..stores.tail import Tail, ThreadCache, is_summary
from .context import (
    Span,
    SummaryScan,
    Window,
    file_line,
    file_lines,
    split_summaries,
    transcript,
)
from .cursor import RunCursor
from .flush import Flushing, flush, flush_key
from .history import Tidiness, model_view

__all__ = ["COMPACTION_PROMPT", "Compaction", "Cut", "Prompts", "compact", "load"]

log = logging.getLogger("maiden.loop")

COMPACTION_PROMPT = (
    "You summarise the start of a conversation between a team and their assistant, so the "
    "assistant can go on without it. Keep what later messages may rely on: facts, "
    "decisions, names, numbers, open questions, what tools did and returned. Be concise; "
    "plain text, no preamble.")


@dataclass(frozen=True, slots=True)
class Compaction:
    """What falls out of the window since the newest summary, and how it is summarised."""

    request: ModelRequest
    """The request that summarises it (with the summary before it)."""
    since: int
    """How many entries the summary before covers (0 without one)."""
    covers: int
    """How many entries the new summary will stand for."""
    files: list[str]
    """A line for each file they (and the summary before) name, which the new summary
    keeps whatever the model writes."""
    falling: Sequence[Entry]
    """The entries that fall out since the summary before."""
    max_chars: int
    """The most characters of them a request quotes."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Where the context window cuts a thread: ``kept`` is sent, the first ``dropped``
    entries are not (summaries set aside, so counted as the summaries' ``covers`` are);
    ``summary`` is the thread's newest summary. ``dropped_entries`` are those of the
    dropped that are loaded: all but the first ``offset`` (a tail's start)."""

    kept: Sequence[Entry]
    dropped: int
    summary: Notice | None
    limit: int | None
    dropped_entries: Sequence[Entry] = ()
    offset: int = 0

    @property
    def covered(self) -> int:
        """How many of the dropped entries the summary stands for."""
        return min(self.summary.covers or 0, self.dropped) if self.summary is not None else 0


@dataclass
class _Thread:
    """What ``Prompts`` keeps per thread, for entries loaded from ``base`` on."""

    base: int
    tidiness: Tidiness = field(default_factory=Tidiness)
    scan: SummaryScan = field(default_factory=SummaryScan)
    window: Window = field(default_factory=Window)
    held: int | None = None
    """Where the window starts, as a position in the thread."""
    pending: int | None = None
    """A held start carried over from entries loaded from another base, to take up."""


class Prompts:
    """Model requests for the threads one driver serves (``system`` is the agent's prompt).

    The per-thread state is kept for the ``threads`` used last (a long-running process
    serves many threads; the state of one not seen for long is rebuilt when it returns).
    """

    def __init__(self, system: str, *, threads: int = 10_000) -> None:
        self.system = system
        self.threads = threads
        self._threads: OrderedDict[str, _Thread] = OrderedDict()

    def _thread(self, thread_id: str, base: int) -> _Thread:
        state = self._threads.pop(thread_id, None)
        if state is None or state.base != base:  # positions are relative to the base
            held = None if state is None else state.held
            state = _Thread(base, pending=held if held is not None and held >= base else None)
        self._threads[thread_id] = state
        if len(self._threads) > self.threads:
            self._threads.popitem(last=False)
        return state

    def forget(self, thread_id: str) -> None:
        """The thread was erased: its state goes (a thread begun anew starts afresh)."""
        self._threads.pop(thread_id, None)

    def held_start(self, thread_id: str) -> int | None:
        """Where the thread's held window starts (at the latest), for loading its tail:
        a tail from there keeps the window where it was."""
        state = self._threads.get(thread_id)
        return None if state is None else state.held

    def cut(self, thread_id: str, entries: Sequence[Entry], tools: Sequence[ToolSpec],
            limit: int | None) -> Cut:
        """Where the window of ``limit`` tokens cuts the thread now (summaries set aside).
        ``entries`` is the whole thread or a ``Tail`` of it."""
        loaded: Sequence[Entry]
        if type(entries) is Tail:
            loaded, base, earlier = entries.loaded, entries.base, entries.summary_before
            offset = base - entries.summaries_before
        else:
            loaded, base, earlier, offset = entries, 0, None, 0
        state = self._thread(thread_id, base)
        view = model_view(loaded, state.tidiness)
        plain, summary = split_summaries(view) if state.scan.any(loaded) else (view, None)
        summary = summary or earlier
        if limit is None:
            return Cut(Span(plain), offset, summary, None, offset=offset)
        # The window's start is kept between turns only where the view is the thread
        # itself (an untidy thread's view is rebuilt each turn).
        window = state.window if view is loaded else Window()
        found = state.scan.found
        if view is loaded and state.pending is not None:
            window.hold(_plain_index(loaded, state.pending - base) if found
                        else state.pending - base)
            state.pending = None
        known = entries.tokens if isinstance(entries, Tail) and plain is loaded else ()
        kept, dropped = window.fit(plain, self.system, limit, tools=tools, known=known)
        if view is loaded:
            state.held = base + (_loaded_index(loaded, dropped) if found else dropped)
        return Cut(kept, offset + dropped, summary, limit, Span(plain, 0, dropped), offset)

    def request(self, run: Run, entries: Sequence[Entry], tools: Sequence[ToolSpec], *,
                final: bool, limit: int | None, now: float) -> ModelRequest:
        """The thread cut to the window; what it leaves out stood for by the summary and,
        for what no summary covers, a notice (in the request only: the store keeps all)."""
        cut = self.cut(run.thread_id, entries, tools, limit)
        first: list[Entry] = []
        if cut.covered:
            assert cut.summary is not None
            first.append(Notice(run_id=run.id, code="summary", at=cut.summary.at,
                                text="Summary of the earlier conversation: " + cut.summary.text))
        if cut.dropped > cut.covered:
            first.append(Notice(run_id=run.id, code="context_trimmed", at=now,
                                text=f"{cut.dropped - cut.covered} older entries of this "
                                "conversation were left out to fit the context window."))
        # A span of the thread as it is now (it only grows), or a new tuple: never a view
        # that could change after the request is made.
        kept = (*first, *cut.kept) if first else cut.kept
        if not isinstance(kept, Span | tuple):
            kept = tuple(kept)
        return ModelRequest(system=self.system, entries=kept, tools=tuple(tools),
                            run_id=run.id, thread_id=run.thread_id, final_turn=final)

    def compaction(self, run: Run, entries: Sequence[Entry], tools: Sequence[ToolSpec],
                   limit: int | None) -> Compaction | None:
        """When the window's cut has moved past what the thread's summary covers: what
        falls out and the request that summarises it (``Compaction``). None when nothing
        new falls out."""
        cut = self.cut(run.thread_id, entries, tools, limit)
        covered = (cut.summary.covers or 0) if cut.summary is not None else 0
        if cut.limit is None or cut.dropped <= covered:
            return None
        earlier = f"Summary so far: {cut.summary.text}\n\n" if cut.summary is not None else ""
        # The driver loads a tail from where the summary stops (covered >= offset).
        falling = cut.dropped_entries[max(covered - cut.offset, 0):]
        text = earlier + transcript(falling, cut.limit * 2)
        request = ModelRequest(
            system=COMPACTION_PROMPT, entries=(UserMessage(run_id=run.id, text=text),),
            tools=(), run_id=run.id, thread_id=run.thread_id, final_turn=True)
        before = file_lines(cut.summary.text) if cut.summary is not None else []
        named = [file_line(f) for e in falling if isinstance(e, UserMessage | ToolResult)
                 for f in (e.files if isinstance(e, UserMessage) else (*e.files, *e.images))]
        return Compaction(request, covered, cut.dropped, list(dict.fromkeys([*before, *named])),
                          falling, cut.limit * 2)

    def move_window(self, thread_id: str) -> None:
        """Forget the held cut (the model refused what it let through)."""
        state = self._threads.get(thread_id)
        if state is not None:
            state.window = Window()


async def load(store: Store, prompts: Prompts, run: Run, *, limit: int | None,
               summary: bool, kept: ThreadCache | None = None) -> list[Entry] | Tail:
    """What the run needs of its thread: with a context window (``limit``), only the tail
    the window holds (from where it is held, and from the run's own message on); else all
    of it (of a thread ``kept`` holds, only the entries since: it is taken from there).
    With ``summary`` compaction, also what falls out of the window since the newest
    summary, for ``compact`` to summarise."""
    fresh = run.state is RunState.QUEUED and run.started_at is None
    if limit is None or (not fresh and run.first_entry is None):
        held = kept.pop(run.thread_id)[1] if kept is not None else []
        if held:
            # Entries are only ever appended: what is held is still the thread's start,
            # unless the thread was erased since (by another process): then the entry where
            # its last one was is another run's, if any (run ids are never reused).
            since = await store.load_entries(run.thread_id, offset=len(held) - 1)
            if since and since[0].run_id == held[-1].run_id:
                held.extend(since[1:])
                return held
        return await store.load_entries(run.thread_id)
    starts = [prompts.held_start(run.thread_id), None if fresh else run.first_entry]
    start = min((s for s in starts if s is not None), default=None)
    tail = await store.load_tail(run.thread_id, limit, start=start)
    if summary and tail.base:
        # What falls out of the window is summarised from where the newest summary
        # stops: load from there (``covers`` counts entries without the summaries, so
        # as a position it is at or before that point).
        covers = (tail.summary_before.covers or 0) if tail.summary_before else 0
        if covers < tail.base - tail.summaries_before:
            tail = await store.load_tail(run.thread_id, limit, start=covers)
    return tail


async def compact(cur: RunCursor, provider: Provider, prompts: Prompts,
                  tools: Sequence[ToolSpec], *, limit: int | None, prices: Prices,
                  keep: Flushing | None = None) -> None:
    """``compaction = "summary"``: when the window's cut has moved past what the
    thread's summary covers, have the model summarise what falls out and store that as
    a ``summary`` notice: durable like any entry, so a crash mid-compaction at worst
    asks again. A failure leaves the history dropped. With ``keep`` (a tool with a
    keeper: the memory flush), what is worth keeping of it is kept first (``flush``):
    written before the summary is committed, each write keyed by the compaction point,
    so the flush re-run after a crash writes nothing twice."""
    run = cur.run
    asked = prompts.compaction(run, cur.entries, tools, limit)
    if asked is None:
        return
    spent = Usage()
    if keep is not None:
        spent = await flush(cur, provider, keep, asked.falling,
                            flush_key(run.thread_id, asked.since, asked.covers),
                            asked.max_chars)
    try:
        response = await provider.complete(asked.request, None)
    except ProviderError as exc:
        log.warning("run %s: the summary of older entries failed (%s); they are left "
                    "out unsummarised", run.id, exc)
        return
    text = response.text.strip()
    missing = [line for line in asked.files if line not in text]
    if missing:  # each file the summarised part named keeps its line
        text += "\n\nFiles shared earlier:\n" + "\n".join(missing)
    summary = Notice(run_id=run.id, code="summary", text=text, covers=asked.covers,
                     at=cur.clock())
    spent = spent + response.usage
    await cur.commit([summary], write=Write.NOTICE, usage=run.usage + spent,
                     cost_usd=run.cost_usd + prices.cost(spent))


def _plain_index(loaded: Sequence[Entry], index: int) -> int:
    """How many entries before ``loaded[index]`` are not summaries."""
    return sum(1 for e in Span(loaded, 0, min(index, len(loaded))) if not is_summary(e))


def _loaded_index(loaded: Sequence[Entry], plain: int) -> int:
    """Where the ``plain``-th entry that is not a summary is in ``loaded``."""
    for i, entry in enumerate(loaded):
        if not is_summary(entry):
            if plain == 0:
                return i
            plain -= 1
    return len(loaded)
