"""Prometheus metrics for `GET /metrics`, derived from the runtime's events and its store.

Counters and histograms come from the event bus (this process's runs, since it
started); gauges are read from the store at each scrape (every process's runs).
Each app has its own registry, so several apps (and tests) never collide.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from runtime import (
    ModelAnswered,
    Run,
    RunEnded,
    RunEvent,
    RunStarted,
    RunState,
    Runtime,
    StateChanged,
    StoreError,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)

__all__ = ["CONTENT_TYPE", "Metrics"]

log = logging.getLogger("maiden.http.metrics")

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
_LATENCY = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
"""The GenAI conventions' recommended buckets for token counts."""
_REMEMBERED = 10_000  # runs whose usage so far is kept, so a resumed run is not counted twice


class Metrics:
    """The app's metrics: feed it events with ``watch()``, render them with ``render()``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.registry = r = CollectorRegistry()
        self.runs = Gauge("maiden_runs", "Runs in the store, by state", ["state"], registry=r)
        self.threads = Gauge("maiden_threads", "Threads in the store", registry=r)
        self.deliveries = Gauge("maiden_deliveries", "Outbox records: delivered, or pending",
                                ["status"], registry=r)
        self.recovered = Gauge("maiden_recovered_runs",
                               "Unfinished runs this process found (and recovered) at start",
                               registry=r)
        self.ended = Counter("maiden_run_ends", "Runs that ended or paused in this process",
                             ["outcome"], registry=r)
        self.recoveries = Counter("maiden_run_recoveries",
                                  "Runs picked up again after their process died", registry=r)
        self.turn_seconds = Histogram("maiden_turn_seconds",
                                      "Model turns: from running to the turn's checkpoint",
                                      buckets=_LATENCY, registry=r)
        self.tool_seconds = Histogram("maiden_tool_seconds", "Tool calls, by tool and outcome",
                                      ["tool", "outcome"], buckets=_LATENCY, registry=r)
        self.tokens = Counter("maiden_tokens", "Tokens spent by runs in this process",
                              ["kind"], registry=r)
        self.cost = Counter("maiden_cost_usd", "Cost of runs in this process, in USD",
                            registry=r)
        # The OpenTelemetry GenAI client metrics, by their names (dots as underscores).
        self.operation_seconds = Histogram(
            "gen_ai_client_operation_duration_seconds", "Model calls, by model",
            ["gen_ai_operation_name", "gen_ai_request_model"], buckets=_LATENCY, registry=r)
        self.token_usage = Histogram(
            "gen_ai_client_token_usage", "Tokens a model call used, by model and type",
            ["gen_ai_request_model", "gen_ai_token_type"], buckets=_TOKENS, registry=r)
        self.first_token_seconds = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Streamed model calls: until their first text, by model",
            ["gen_ai_request_model"], buckets=_LATENCY, registry=r)
        for state in RunState:
            self.runs.labels(state.value)
        for kind in Usage.model_fields:
            self.tokens.labels(kind.removesuffix("_tokens"))
        self._turns: dict[str, float] = {}
        self._tools: dict[tuple[str, str], tuple[str, float]] = {}
        self._spent: OrderedDict[str, tuple[Usage, float]] = OrderedDict()

    async def watch(self) -> None:
        """Consume every run's events until cancelled."""
        async with self.runtime.subscribe() as events:
            while True:
                event = await events.next()
                try:
                    await self.observe(event)
                except StoreError as exc:  # the store out of reach a moment: one line
                    log.warning("metrics: could not account for %s of run %s (%s)",
                                event.kind, event.run_id, exc)
                except Exception:
                    log.exception("metrics: could not account for %s", event.kind)

    async def observe(self, event: RunEvent, now: float | None = None) -> None:
        at = time.monotonic() if now is None else now
        if isinstance(event, StateChanged):
            started = self._turns.pop(event.run_id, None)
            if event.state is RunState.RUNNING:
                self._turns[event.run_id] = at
            elif started is not None and event.state in (RunState.AWAITING_TOOL,
                                                         RunState.COMPLETED):
                self.turn_seconds.observe(at - started)
        elif isinstance(event, ModelAnswered):
            self.operation_seconds.labels("chat", event.model).observe(event.seconds)
            self.token_usage.labels(event.model, "input").observe(event.input_tokens)
            self.token_usage.labels(event.model, "output").observe(event.output_tokens)
            if event.first_token_s is not None:
                self.first_token_seconds.labels(event.model).observe(event.first_token_s)
        elif isinstance(event, ToolCallStarted):
            self._tools[(event.run_id, event.call.id)] = (event.call.name, at)
        elif isinstance(event, ToolCallFinished):
            found = self._tools.pop((event.run_id, event.tool_call_id), None)
            if found is not None:
                outcome = "error" if event.is_error else "ok"
                self.tool_seconds.labels(found[0], outcome).observe(at - found[1])
        elif isinstance(event, RunStarted) and event.recovered:
            self.recoveries.inc()
        elif isinstance(event, RunEnded):
            self.ended.labels(event.kind.removeprefix("run.")).inc()
            self._turns.pop(event.run_id, None)
            for key in [k for k in self._tools if k[0] == event.run_id]:
                del self._tools[key]
            self._spend(event.run or await self.runtime.records.get_run(event.run_id))

    def _spend(self, run: Run) -> None:
        """Count what the run spent since it was last seen (its usage is cumulative)."""
        run_id = run.id
        usage, cost = self._spent.pop(run_id, (Usage(), 0.0))
        for kind, total in run.usage.model_dump().items():
            delta = total - getattr(usage, kind)
            if delta > 0:
                self.tokens.labels(kind.removesuffix("_tokens")).inc(delta)
        if run.cost_usd > cost:
            self.cost.inc(run.cost_usd - cost)
        self._spent[run_id] = (run.usage, run.cost_usd)
        while len(self._spent) > _REMEMBERED:
            self._spent.popitem(last=False)

    async def render(self) -> bytes:
        """Refresh the gauges read from the store, then the exposition text."""
        stats = await self.runtime.records.stats()
        for state in RunState:
            self.runs.labels(state.value).set(stats.runs.get(state, 0))
        self.threads.set(stats.threads)
        self.deliveries.labels("pending").set(stats.deliveries_pending)
        self.deliveries.labels("delivered").set(stats.deliveries_sent)
        self.recovered.set(len(self.runtime.operator.recovered))
        return generate_latest(self.registry)
