"""Traces of runs, model calls and tool calls: OpenTelemetry spans in the GenAI semantic
conventions, exported over OTLP/HTTP when ``[otel] endpoint`` is set.

One span per stretch of a run this process drives (``invoke_agent {agent}``), a child per
model call (``chat {model}``), per tool call (``execute_tool {name}``) and per durable
checkpoint (``checkpoint``); beside them, each outbox send (``deliver {what}``) and the
wait for a person (``await_approval {tool}``). A run keeps one trace across crashes,
replicas and pauses: its first stretch records its own span as the run's ``trace`` (with
its start; or the ``traceparent`` of the request that brought it is), and every later
stretch is traced under it. What people
wrote, what the model answered and what tools returned are left out unless ``[otel]
capture_content`` is true; ids, models, token counts, effects and outcomes are always in.

Off (the default), ``NO_TRACING`` hands out one shared no-op context manager: the loop
pays an attribute look-up and a ``with`` per span, and OpenTelemetry is never imported.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..errors import ConfigError
from ..model.config import OtelConfig
from ..model.entries import ToolCall
from ..model.runs import Decision, Delivery, PendingApproval, Run
from ..providers.base import ModelResponse
from ..tools.base import ToolOutput

__all__ = ["NO_TRACING", "OtelTracing", "Span", "Tracing", "current_trace_id", "make_tracing",
           "note_retry", "probe_collector", "traceparent_of"]

_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def current_trace_id() -> str:
    """The trace id of the span current where this is called ('' when there is none; no
    import of OpenTelemetry when tracing never started)."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return ""
    context = api.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else ""


def note_retry(attempt: int, reason: str) -> None:
    """A retry of what the current span does (a provider's request sent again), as an
    event on it; nothing when untraced."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return
    span = api.get_current_span()
    if span.is_recording():
        span.add_event("retry", {"maiden.retry.attempt": attempt, "maiden.reason": reason})


def traceparent_of(value: str | None) -> str:
    """``value`` if it is a W3C ``traceparent`` (version 00, ids not zero), else ''."""
    value = (value or "").strip().lower()
    return value if _TRACEPARENT.fullmatch(value) else ""


class Span:
    """What the loop tells a span (nothing, when tracing is off)."""

    def ended(self, run: Run) -> None:
        """The run as this stretch of it left it."""

    def answered(self, response: ModelResponse) -> None:
        """The model's answer (its model, tokens and why it stopped)."""

    def retried(self, reason: str) -> None:
        """The model was asked again (``reason``)."""

    def returned(self, output: ToolOutput | None) -> None:
        """The call's output (None: it paused for a person)."""

    def recovered(self, attempt: int) -> None:
        """This stretch takes the run up after a crash (its ``attempt``-th recovery)."""

    def failed(self, why: str) -> None:
        """What was tried did not work (it is tried again)."""

    def traceparent(self) -> str:
        """This span as a W3C ``traceparent`` ('' when not traced)."""
        return ""


class Tracing:
    """Tracing off: every span is the same no-op."""

    enabled = False

    def run(self, run_id: str, agent: str, parent: str = "") -> AbstractContextManager[Span]:
        """A stretch of the run, under ``parent`` (a ``traceparent``) if given."""
        return _OFF

    def model(self, model: str) -> AbstractContextManager[Span]:
        return _OFF

    def tool(self, call: ToolCall, effect: str | None) -> AbstractContextManager[Span]:
        return _OFF

    def checkpoint(self, entries: int) -> AbstractContextManager[Span]:
        """A durable checkpoint's commit (``entries`` new entries in it)."""
        return _OFF

    def delivery(self, delivery: Delivery, what: str, *, fresh: bool, parent: str = ""
                 ) -> AbstractContextManager[Span]:
        """Sending one outbox record (``what``: reply, approval prompt, file); ``fresh``:
        never tried before (else the channel is asked first whether it was sent)."""
        return _OFF

    def waited(self, run: Run, pending: PendingApproval, decided: Decision) -> None:
        """A span for the time the run waited for a person, from the request to the
        decision, in the run's trace (nothing, when off)."""

    def close(self) -> None:
        """Send what is buffered and stop (nothing, when off)."""

    def link(self, trace: str) -> str | None:
        """Where the trace of a run whose ``trace`` is this is shown, if configured."""
        return None


class _Off(AbstractContextManager[Span]):
    __slots__ = ()

    def __enter__(self) -> Span:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = Span()
_OFF = _Off()
NO_TRACING = Tracing()
"""Tracing off."""


class OtelTracing(Tracing):
    """Spans of an OpenTelemetry ``TracerProvider`` (its processors decide where they go)."""

    enabled = True

    def __init__(self, provider: Any, *, capture_content: bool = False,
                 trace_url: str = "") -> None:
        self.provider = provider
        self.capture_content = capture_content
        self.trace_url = trace_url
        """``[otel] trace_url``: a trace's page, ``{trace_id}`` in it."""
        self._tracer = provider.get_tracer("maiden")

    def link(self, trace: str) -> str | None:
        parts = traceparent_of(trace).split("-")
        if not self.trace_url or len(parts) != 4:
            return None
        return self.trace_url.replace("{trace_id}", parts[1])

    def run(self, run_id: str, agent: str, parent: str = "") -> AbstractContextManager[Span]:
        return self._span(f"invoke_agent {agent}", {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "maiden.run.id": run_id}, _RunSpan, parent=parent)

    def model(self, model: str) -> AbstractContextManager[Span]:
        return self._span(f"chat {model}", {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model}, _ModelSpan)

    def tool(self, call: ToolCall, effect: str | None) -> AbstractContextManager[Span]:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                      "gen_ai.tool.call.id": call.id, "maiden.tool.effect": effect or "none"}
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        return self._span(f"execute_tool {call.name}", attributes, _ToolSpan)

    def close(self) -> None:
        self.provider.shutdown()

    def checkpoint(self, entries: int) -> AbstractContextManager[Span]:
        return self._span("checkpoint", {"maiden.checkpoint.entries": entries,
                                         "maiden.checkpoint.durable": True}, _Recording)

    def delivery(self, delivery: Delivery, what: str, *, fresh: bool, parent: str = ""
                 ) -> AbstractContextManager[Span]:
        return self._span(f"deliver {what}", {
            "maiden.run.id": delivery.run_id, "maiden.channel": delivery.channel,
            "maiden.delivery.kind": what, "maiden.delivery.reconciled": not fresh,
            "maiden.delivery.failed_before": delivery.attempts_failed}, _DeliverySpan,
            parent=parent)

    def waited(self, run: Run, pending: PendingApproval, decided: Decision) -> None:
        context = _propagator().extract({"traceparent": run.trace}) if run.trace else None
        span = self._tracer.start_span(
            f"await_approval {pending.name}", context=context,
            start_time=int(pending.requested_at * 1e9), attributes={
                "maiden.run.id": run.id, "gen_ai.tool.name": pending.name,
                "gen_ai.tool.call.id": pending.tool_call_id, "maiden.approval.reason":
                pending.reason, "maiden.approval.approved": decided.approve,
                "maiden.approval.by": decided.by})
        span.end(end_time=int(max(decided.at, pending.requested_at) * 1e9))

    @contextmanager
    def _span(self, name: str, attributes: Mapping[str, Any], kind: type[_Recording], *,
              parent: str = "") -> Iterator[Span]:
        context = _propagator().extract({"traceparent": parent}) if parent else None
        with self._tracer.start_as_current_span(name, context=context,
                                                attributes=attributes) as span:
            yield kind(span, self.capture_content)


class _Recording(Span):
    def __init__(self, span: Any, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content

    def traceparent(self) -> str:
        from opentelemetry import trace

        carrier: dict[str, str] = {}
        _propagator().inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier.get("traceparent", "")


class _RunSpan(_Recording):
    def recovered(self, attempt: int) -> None:
        self.span.add_event("recovered", {"maiden.run.recovery_attempt": attempt})

    def ended(self, run: Run) -> None:
        origin = run.origin
        attributes: dict[str, Any] = {
            "gen_ai.conversation.id": run.thread_id, "maiden.run.state": str(run.state),
            "maiden.run.reason": run.reason, "maiden.channel": origin.channel,
            "maiden.run.turns": run.turns, "maiden.run.tool_calls": run.tool_calls,
            "gen_ai.usage.input_tokens": run.usage.input_tokens,
            "gen_ai.usage.output_tokens": run.usage.output_tokens,
            "maiden.run.cost_usd": run.cost_usd}
        if origin.place:
            attributes["maiden.place"] = list(origin.place)
        if origin.user:
            attributes["maiden.user"] = origin.user
        if run.recovery_attempts:
            attributes["maiden.run.recovery_attempts"] = run.recovery_attempts
        if self.capture_content:
            attributes["maiden.run.text"] = run.text
            if run.reply is not None:
                attributes["maiden.run.reply"] = run.reply
        self.span.set_attributes(attributes)


class _DeliverySpan(_Recording):
    def failed(self, why: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_status(Status(StatusCode.ERROR, why))


def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


class _ModelSpan(_Recording):
    def answered(self, response: ModelResponse) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.usage.input_tokens": response.usage.input_tokens,
            "gen_ai.usage.output_tokens": response.usage.output_tokens}
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        if response.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        if self.capture_content and response.text:
            attributes["maiden.response.text"] = response.text
        self.span.set_attributes(attributes)

    def retried(self, reason: str) -> None:
        self.span.add_event("retry", {"maiden.reason": reason})


class _ToolSpan(_Recording):
    def returned(self, output: ToolOutput | None) -> None:
        if output is None:
            self.span.set_attribute("maiden.tool.outcome", "paused")
            return
        outcome = "ok"
        if output.is_error:
            error = output.content.get("error") if isinstance(output.content, dict) else None
            kind = error.get("type") if isinstance(error, dict) else None
            outcome = f"error: {kind}" if kind else "error"
        self.span.set_attribute("maiden.tool.outcome", outcome)
        if self.capture_content:
            self.span.set_attribute("gen_ai.tool.call.result", _json(output.content))


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def make_tracing(cfg: OtelConfig, env: Mapping[str, str] | None = None) -> Tracing:
    """Tracing as ``[otel]`` says: off without an endpoint; else spans batched to it over
    OTLP/HTTP (``ConfigError`` naming the key when the SDK is missing or a key is wrong)."""
    if not cfg.endpoint:
        return NO_TRACING
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError:
        raise ConfigError([("otel.endpoint", "traces need the OpenTelemetry SDK: pip install "
                            "'maiden[otel]'")]) from None
    headers = _headers(cfg, os.environ if env is None else env)
    provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}),
                              sampler=ParentBased(TraceIdRatioBased(cfg.sample_ratio)))
    exporter = OTLPSpanExporter(endpoint=cfg.traces_url(), headers=headers,
                                timeout=cfg.timeout_s)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return OtelTracing(provider, capture_content=cfg.capture_content,
                       trace_url=cfg.trace_url)


def _headers(cfg: OtelConfig, env: Mapping[str, str]) -> dict[str, str]:
    """``k=v,k2=v2`` from the variable ``headers_env`` names (an API key, say)."""
    if not cfg.headers_env:
        return {}
    raw = env.get(cfg.headers_env, "").strip()
    if not raw:
        raise ConfigError([("otel.headers_env", f"${cfg.headers_env} is not set (it holds "
                            "the exporter's headers: key=value,key2=value2)")])
    headers = {}
    for part in raw.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ConfigError([("otel.headers_env", f"${cfg.headers_env} is not "
                                "key=value,key2=value2")])
        headers[key.strip()] = value.strip()
    return headers


async def probe_collector(cfg: OtelConfig, env: Mapping[str, str] | None = None
                          ) -> tuple[bool, str]:
    """Whether the collector at ``[otel] endpoint`` takes spans: an empty export request
    (no spans) posted as the exporter would post one; ``(ok, what it said)``."""
    import httpx

    headers = {"Content-Type": "application/x-protobuf",
               **_headers(cfg, os.environ if env is None else env)}
    try:
        async with httpx.AsyncClient(timeout=min(cfg.timeout_s, 5.0)) as client:
            answer = await client.post(cfg.traces_url(), content=b"", headers=headers)
    except httpx.HTTPError as exc:
        return False, f"does not answer: {type(exc).__name__}: {exc}"
    if answer.is_success:
        return True, f"answers (HTTP {answer.status_code})"
    return False, f"refuses spans: HTTP {answer.status_code} {answer.text[:200]}"
