"""What each model request holds: the thread as the model sees it, cut to the context window,
with a summary or a notice standing for what the window leaves out.

``Prompts`` keeps the per-thread state that makes this cheap and steady turn after turn:
the tidiness check and the summary scan (incremental: threads only grow) and the window's
cut (held still for the providers' prompt caches). The driver asks it for a request, and,
with ``compaction = "summary"``, for the request that summarises what falls out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .context import Span, SummaryScan, Window, split_summaries, transcript
from .entries import Entry, Notice, UserMessage
from .history import Tidiness, model_view
from .providers.base import ModelRequest
from .runs import Run
from .tools import ToolSpec

__all__ = ["COMPACTION_PROMPT", "Cut", "Prompts"]

COMPACTION_PROMPT = (
    "You summarise the start of a conversation between a team and their assistant, so the "
    "assistant can go on without it. Keep what later messages may rely on: facts, "
    "decisions, names, numbers, open questions, what tools did and returned. Be concise; "
    "plain text, no preamble.")


@dataclass(frozen=True, slots=True)
class Cut:
    """Where the context window cuts a thread: ``kept`` is sent, the first ``dropped``
    entries (``dropped_entries``) are not; ``summary`` is the thread's newest summary."""

    kept: Sequence[Entry]
    dropped: int
    summary: Notice | None
    limit: int | None
    dropped_entries: Sequence[Entry] = ()

    @property
    def covered(self) -> int:
        """How many of the dropped entries the summary stands for."""
        return min(self.summary.covers or 0, self.dropped) if self.summary is not None else 0


class Prompts:
    """Model requests for the threads one driver serves (``system`` is the agent's prompt)."""

    def __init__(self, system: str) -> None:
        self.system = system
        self._tidiness: dict[str, Tidiness] = {}
        self._windows: dict[str, Window] = {}
        self._summaries: dict[str, SummaryScan] = {}

    def cut(self, thread_id: str, entries: Sequence[Entry], tools: Sequence[ToolSpec],
            limit: int | None) -> Cut:
        """Where the window of ``limit`` tokens cuts the thread now (summaries set aside)."""
        view = model_view(entries, self._tidiness.setdefault(thread_id, Tidiness()))
        scan = self._summaries.setdefault(thread_id, SummaryScan())
        plain, summary = split_summaries(view) if scan.any(entries) else (view, None)
        if limit is None:
            return Cut(Span(plain), 0, summary, None)
        # The window's start is kept between turns only where the view is the thread
        # itself (an untidy thread's view is rebuilt each turn).
        window = self._windows.setdefault(thread_id, Window()) \
            if view is entries else Window()
        kept, dropped = window.fit(plain, self.system, limit, tools=tools)
        return Cut(kept, dropped, summary, limit, Span(plain, 0, dropped))

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
                   limit: int | None) -> tuple[ModelRequest, int] | None:
        """When the window's cut has moved past what the thread's summary covers: the
        request that summarises what falls out (with the summary before it), and how many
        entries the new summary will stand for. None when nothing new falls out."""
        cut = self.cut(run.thread_id, entries, tools, limit)
        covered = (cut.summary.covers or 0) if cut.summary is not None else 0
        if cut.limit is None or cut.dropped <= covered:
            return None
        earlier = f"Summary so far: {cut.summary.text}\n\n" if cut.summary is not None else ""
        text = earlier + transcript(cut.dropped_entries[covered:], cut.limit * 2)
        request = ModelRequest(
            system=COMPACTION_PROMPT, entries=(UserMessage(run_id=run.id, text=text),),
            tools=(), run_id=run.id, thread_id=run.thread_id, final_turn=True)
        return request, cut.dropped

    def move_window(self, thread_id: str) -> None:
        """Forget the held cut (the model refused what it let through)."""
        self._windows.pop(thread_id, None)
