"""Traces (``[otel]``): a run's spans in the GenAI conventions, through the real
OpenTelemetry SDK, into its in-memory exporter and over OTLP/HTTP to a receiver on
loopback that decodes the protobuf payloads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from runtime import (
    ConfigError,
    Origin,
    OtelConfig,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
    make_tracing,
    probe_collector,
    tool,
)
from runtime.engine.tracing import NO_TRACING, OtelTracing

SECRET = "my card number is 4111"


@tool
def lookup(query: str) -> dict[str, str]:
    """Look something up."""
    return {"found": query.upper()}


SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "lookup", "arguments": {"query": "x"}}]}, {"text": "the answer"}]


async def _one_message(tmp_path: Path, tracing: Any) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(SCRIPT), ToolRegistry([lookup]),
                    tracing=tracing) as rt:
        run = await rt.send("slack:T1:C1:1.0", SECRET,
                            origin=Origin(channel="slack", user="U42", place=("C1", "T1")))
    assert run.reply == "the answer"


@pytest.fixture
def exported() -> Iterator[tuple[OtelTracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield OtelTracing(provider), exporter
    provider.shutdown()


async def test_a_run_is_one_span_with_its_model_and_tool_calls_beneath(
        tmp_path: Path, exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    tracing, exporter = exported
    await _one_message(tmp_path, tracing)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    names = [s.name for s in exporter.get_finished_spans()]
    # The answer's commit is the run's one durable checkpoint (the rest is read-only).
    assert sorted(names) == ["chat scripted", "chat scripted", "checkpoint",
                             "execute_tool lookup", "invoke_agent maiden"]
    root = spans["invoke_agent maiden"]
    assert root.parent is None
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id
               and s.context.trace_id == root.context.trace_id
               for s in exporter.get_finished_spans() if s is not root)
    attributes = dict(root.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "maiden"
    assert attributes["gen_ai.conversation.id"] == "slack:T1:C1:1.0"
    assert attributes["maiden.run.state"] == "completed"
    assert attributes["maiden.channel"] == "slack" and attributes["maiden.user"] == "U42"
    assert attributes["maiden.place"] == ("C1", "T1")
    assert attributes["maiden.run.turns"] == 2 and attributes["maiden.run.tool_calls"] == 1
    chat = [s for s in exporter.get_finished_spans() if s.name == "chat scripted"]
    assert [dict(s.attributes or {})["gen_ai.request.model"] for s in chat] == ["scripted"] * 2
    assert all("gen_ai.usage.input_tokens" in (s.attributes or {}) for s in chat)
    call = dict(spans["execute_tool lookup"].attributes or {})
    assert call["gen_ai.tool.name"] == "lookup" and call["gen_ai.tool.call.id"]
    assert call["maiden.tool.effect"] == "read_only" and call["maiden.tool.outcome"] == "ok"
    # What people wrote, the answer and the tool's result stay out by default.
    everything = " ".join(str(v) for s in exporter.get_finished_spans()
                          for v in (s.attributes or {}).values())
    assert SECRET not in everything and "the answer" not in everything
    assert "gen_ai.tool.call.result" not in call


async def test_content_is_captured_only_when_asked(
        tmp_path: Path, exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    tracing, exporter = exported
    tracing.capture_content = True
    await _one_message(tmp_path, tracing)
    spans = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans()}
    assert spans["invoke_agent maiden"]["maiden.run.text"] == SECRET
    assert spans["invoke_agent maiden"]["maiden.run.reply"] == "the answer"
    assert spans["execute_tool lookup"]["gen_ai.tool.call.arguments"] == '{"query": "x"}'
    assert spans["execute_tool lookup"]["gen_ai.tool.call.result"] == '{"found": "X"}'


def test_without_an_endpoint_tracing_is_off() -> None:
    assert make_tracing(OtelConfig()) is NO_TRACING
    assert not NO_TRACING.enabled


def test_a_bad_otel_config_names_its_key() -> None:
    with pytest.raises(ValidationError, match="http:// or https://"):
        OtelConfig(endpoint="127.0.0.1:4318")
    with pytest.raises(ConfigError, match=r"otel\.headers_env"):
        make_tracing(OtelConfig(endpoint="http://127.0.0.1:4318", headers_env="NOPE"), env={})
    with pytest.raises(ConfigError, match=r"otel\.headers_env"):
        make_tracing(OtelConfig(endpoint="http://127.0.0.1:4318", headers_env="H"),
                     env={"H": "no equals sign"})
    with pytest.raises(ValidationError, match="trace_id"):
        OtelConfig(trace_url="https://tempo.example/trace/")
    assert OtelConfig(endpoint="http://h:4318/").traces_url() == "http://h:4318/v1/traces"
    assert OtelConfig(endpoint="http://h/otlp/v1/traces").traces_url() == \
        "http://h/otlp/v1/traces"


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector's trace endpoint: keeps each decoded request."""

    received: list[tuple[str, dict[str, str], ExportTraceServiceRequest]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append((self.path, dict(self.headers), request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


async def test_spans_go_to_an_otlp_http_collector(tmp_path: Path) -> None:
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        cfg = OtelConfig(endpoint=f"http://127.0.0.1:{server.server_port}",
                         headers_env="OTEL_H", service_name="maiden-test")
        tracing = make_tracing(cfg, env={"OTEL_H": "x-api-key=k1"})
        assert tracing.enabled
        await _one_message(tmp_path, tracing)
        tracing.close()  # what the batch holds is sent now
    finally:
        server.shutdown()
        server.server_close()
    assert _Receiver.received
    assert {path for path, _, _ in _Receiver.received} == {"/v1/traces"}
    assert all(headers.get("x-api-key") == "k1" for _, headers, _ in _Receiver.received)
    names, services = [], set()
    for _, _, request in _Receiver.received:
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes
                         if a.key == "service.name"}
            for scope in resource_spans.scope_spans:
                names += [span.name for span in scope.spans]
    assert sorted(names) == ["chat scripted", "chat scripted", "checkpoint",
                             "execute_tool lookup", "invoke_agent maiden"]
    assert services == {"maiden-test"}


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


async def test_a_run_keeps_one_trace_across_a_pause(
        tmp_path: Path, exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    """Paused for a person, then approved: the second stretch is in the first one's trace,
    beneath its span (the run's ``trace``, recorded with its start)."""
    tracing, exporter = exported
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "deploy", "arguments": {"env": "prod"}}]}, {"text": "deployed"}]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), ToolRegistry([deploy]),
                    tracing=tracing) as rt:
        run = await rt.send("t", "ship it")
        assert run.pending_approval is not None and run.trace
        await rt.decide(run.id, run.pending_approval.tool_call_id, approve=True, by="ops")
        done = await rt.wait(run.id)
    assert done.reply == "deployed" and done.trace == run.trace
    first, second = [s for s in exporter.get_finished_spans()
                     if s.name == "invoke_agent maiden"]
    assert first.parent is None
    assert second.context.trace_id == first.context.trace_id
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert run.trace.split("-")[1] == f"{first.context.trace_id:032x}"
    paused = [s for s in exporter.get_finished_spans() if s.name == "execute_tool deploy"]
    assert [dict(s.attributes or {})["maiden.tool.outcome"] for s in paused] == ["paused", "ok"]
    # The wait for the person is a span of its own, from the request to the decision.
    (waited,) = [s for s in exporter.get_finished_spans() if s.name == "await_approval deploy"]
    assert waited.context.trace_id == first.context.trace_id
    assert waited.parent is not None and waited.parent.span_id == first.context.span_id
    assert dict(waited.attributes or {})["maiden.approval.approved"] is True
    assert dict(waited.attributes or {})["maiden.approval.by"] == "ops"
    assert waited.start_time is not None and waited.end_time is not None
    assert waited.start_time <= waited.end_time


class Chat:
    """A channel that keeps what it is sent (and fails the first send when told to)."""

    max_chars: int | None = None

    def __init__(self, fail_first: bool = False) -> None:
        self.sent: list[str] = []
        self.fail_first = fail_first

    async def send(self, delivery: Any) -> str:
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError("the platform is down")
        self.sent.append(delivery.key)
        return f"m{len(self.sent)}"

    async def reconcile(self, delivery: Any) -> str | None:
        return None


async def test_a_reply_sent_is_a_span_in_the_runs_trace(
        tmp_path: Path, exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    tracing, exporter = exported
    chat = Chat(fail_first=True)
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider([{"text": "hi"}]), ToolRegistry([]),
                    tracing=tracing, deliverers={"chat": chat}) as rt:
        run = await rt.send("t", "hello", origin=Origin(channel="chat", target={"room": "r"}))
        await rt.idle()  # its worker has tried to send the reply
        await rt.operator.flush_deliveries()  # the failed send, tried again
    assert len(chat.sent) == 1
    sends = [s for s in exporter.get_finished_spans() if s.name == "deliver reply"]
    assert len(sends) == 2
    first, again = sends
    trace_id = int(run.trace.split("-")[1], 16)
    assert first.context.trace_id == again.context.trace_id == trace_id  # the run's
    assert first.status.status_code.name == "ERROR" and "down" in (first.status.description
                                                                  or "")
    assert dict(again.attributes or {})["maiden.delivery.reconciled"] is True
    assert dict(again.attributes or {})["maiden.delivery.failed_before"] == 1
    assert again.status.status_code.name == "UNSET"


async def test_untraced_runs_record_no_trace(tmp_path: Path) -> None:
    await _one_message(tmp_path, NO_TRACING)
    async with SQLiteStore(tmp_path / "m.db") as store:
        (run,) = await store.list_runs()
    assert run.trace == ""


async def test_a_run_is_traced_beneath_the_request_that_brought_it(
        tmp_path: Path, exported: tuple[OtelTracing, InMemorySpanExporter]) -> None:
    tracing, exporter = exported
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(SCRIPT), ToolRegistry([lookup]),
                    tracing=tracing) as rt:
        run = await rt.submit("t", "go", trace=parent)
        done = await rt.wait(run.id)
    assert done.trace == parent
    (root,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert f"{root.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert root.parent is not None and f"{root.parent.span_id:016x}" == "b7ad6b7169203331"


async def test_the_collector_is_asked_whether_it_takes_spans() -> None:
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    port = server.server_port
    try:
        ok, said = await probe_collector(OtelConfig(endpoint=f"http://127.0.0.1:{port}"))
    finally:
        server.shutdown()
        server.server_close()
    assert ok and said == "answers (HTTP 200)"
    assert [(path, len(request.resource_spans)) for path, _, request in _Receiver.received] \
        == [("/v1/traces", 0)]  # an empty export: no span made up
    ok, said = await probe_collector(OtelConfig(endpoint=f"http://127.0.0.1:{port}"))
    assert not ok and said.startswith("does not answer: ConnectError")
