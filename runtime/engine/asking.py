"""Asking the model for a run's next turn: the request cut to the context window, with
what it shows of the files its messages name, sent to the provider (once more, trimmed,
when the provider says it is too long), and what the answer cost published."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from ..errors import ContextTooLong
from ..model.config import AgentConfig
from ..model.entries import Entry, ToolResult, UserMessage
from ..model.events import EventBus, ModelAnswered
from ..model.toolspec import ToolSpec
from ..providers.base import ModelRequest, ModelResponse, Provider, TextSink, seeing
from ..stores.tail import first_loaded
from ..tools.registry import ToolRegistry
from .context import prompt_tokens
from .cursor import RunCursor
from .files import Files
from .prompting import Prompts
from .tracing import Span, Tracing

__all__ = ["Asking"]

log = logging.getLogger("maiden.loop")


class Asking:
    """The model calls of ``RunDriver`` (which has these attributes)."""

    provider: Provider
    tools: ToolRegistry
    agent: AgentConfig
    bus: EventBus
    clock: Callable[[], float]
    files: Files
    prompts: Prompts
    tracing: Tracing
    _file_scan: dict[str, tuple[int, bool]]

    async def _ask(self, cur: RunCursor, final: bool, request: ModelRequest,
                   on_text: TextSink) -> ModelResponse:
        """The provider's next turn for ``request``."""
        began, first = time.perf_counter(), 0.0

        async def timed(delta: str) -> None:
            nonlocal first
            if not first:
                first = time.perf_counter()
            await on_text(delta)

        with self.tracing.model(_model_name(self.provider)) as span:
            response = await self._complete(cur, final, request, timed, span)
            span.answered(response)
        run = cur.run
        self.bus.publish(ModelAnswered(
            run_id=run.id, thread_id=run.thread_id,
            model=response.model or _model_name(self.provider),
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            seconds=time.perf_counter() - began, first_token_s=first - began if first else None))
        return response

    async def _complete(self, cur: RunCursor, final: bool, request: ModelRequest,
                        on_text: TextSink, span: Span) -> ModelResponse:
        try:
            return await self.provider.complete(request, on_text)
        except ContextTooLong as exc:
            # Our estimate was off for this model: trim to well under what was sent and
            # try once more (a second refusal fails the run, resumable, as any provider
            # error does).
            run = cur.run
            sent = prompt_tokens(request.system, request.tools, request.entries)
            log.warning("run %s: the model refused %d estimated tokens as too long (%s); "
                        "trimming to %d and trying again", run.id, sent, exc, sent // 2)
            span.retried("context too long")
            self.prompts.move_window(run.thread_id)
            request = await self._with_files(cur, self._request(cur, final, limit=sent // 2))
            return await self.provider.complete(request, on_text)

    def _request(self, cur: RunCursor, final: bool, *, limit: int | None = None) -> ModelRequest:
        """What the model is sent: the thread as the model sees it, cut to the context
        window (``limit``, else ``max_context_tokens``, else what the provider says its
        model holds), the system prompt, and the tools unless it is the final turn."""
        return self.prompts.request(cur.run, cur.entries, self._tool_specs(final), final=final,
                                    limit=limit or self._limit(), now=self.clock())

    async def _with_files(self, cur: RunCursor, request: ModelRequest) -> ModelRequest:
        """The request with what it shows the model of the files its messages name."""
        if not self._may_name_files(cur) or not any(_names_files(e) for e in request.entries):
            return request
        files = await self.files.parts(request.entries, seeing(self.provider))
        return dataclasses.replace(request, files=files)

    def _may_name_files(self, cur: RunCursor) -> bool:
        """Whether any loaded entry of the run's thread names a file: each entry looked at
        once (a long thread without files costs nothing per turn), a thread that has one
        looked at whole, per request, by ``_with_files``."""
        thread, entries = cur.run.thread_id, cur.entries
        seen, found = self._file_scan.pop(thread, (0, False))
        if seen > len(entries):  # loaded anew, shorter: look again
            seen, found = 0, False
        if not found:
            start = max(seen, first_loaded(entries))
            found = any(_names_files(e) for e in entries[start:])
        self._file_scan[thread] = (len(entries), found)
        if len(self._file_scan) > _FILE_SCANS_KEPT:
            del self._file_scan[next(iter(self._file_scan))]  # the least recently asked
        return found

    def _tool_specs(self, final: bool) -> tuple[ToolSpec, ...]:
        return () if final else tuple(self.tools.specs())

    def _limit(self) -> int | None:
        limit: int | None = self.agent.max_context_tokens or getattr(
            self.provider, "context_window", None)
        return limit


def _model_name(provider: object) -> str:
    return str(getattr(provider, "model", "") or type(provider).__name__)



_FILE_SCANS_KEPT = 4096
"""Threads whose file scan is remembered (a thread forgotten is looked at whole again)."""


def _names_files(entry: Entry) -> bool:
    return (isinstance(entry, UserMessage) and bool(entry.files)) or (
        isinstance(entry, ToolResult) and bool(entry.images))

