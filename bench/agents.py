"""Workload 13: several agents and spend caps. N messages from Slack-like origins over 20
threads in 4 places, each answered by the echo model, through three runtimes on three
SQLite stores side by side: one agent (the baseline); two agents with routes (a message
finds its thread's agent: one more read, of the thread's newest run); the same with three
spend caps (per person, per place, per agent) over a store that already holds K runs this
month (each run's start and each model turn reads the period's ledger). Message by
message, the three take turns going first, so noise hits each alike. Measured: the mean
ms per message of each, against the baseline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    CapConfig,
    EchoProvider,
    Origin,
    RouteConfig,
    Run,
    RunState,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    Usage,
)
from runtime.model.runs import new_run_id
from runtime.stores.sqlite import Synchronous

from .table import Row
from .thread import remove_db

__all__ = ["AgentsResult", "agents_rows", "run_agents"]

CASES = ("one agent", "two agents + routes", "two agents + routes + 3 caps")
PLACES = ("C1", "C2", "C3", "C4")


@dataclass
class AgentsResult:
    messages: int
    prior: int
    ms: dict[str, list[float]] = field(default_factory=dict)


def _agents() -> Agents:
    tools = ToolRegistry()
    return Agents([Agent(AgentConfig(name="support"), EchoProvider(), tools),
                   Agent(AgentConfig(name="eng"), EchoProvider(), tools)],
                  [RouteConfig(place="C1", agent="eng"), RouteConfig(place="C3", agent="eng")])


CAPS = [CapConfig(scope="user", tokens=10**12, period="month"),
        CapConfig(scope="place", tokens=10**12),
        CapConfig(scope="agent", cost_usd=10**9, period="month")]


async def _fill(store: SQLiteStore, prior: int) -> None:
    """``prior`` finished runs created over the last day, each with some usage."""
    now = time.time()
    for i in range(prior):
        at = now - 86_400 + i * 86_400 / max(prior, 1)
        place = PLACES[i % len(PLACES)]
        await store.create_run(Run(
            id=new_run_id(at), thread_id=f"old:{i % 50}", text="earlier " * 20,
            state=RunState.COMPLETED, reason="answered", created_at=at, updated_at=at,
            agent="eng" if place in ("C1", "C3") else "support",
            origin=Origin(channel="slack", target={"channel": place}, user=f"U{i % 7}",
                          place=(place,)),
            usage=Usage(input_tokens=400, output_tokens=60), cost_usd=0.001))


async def run_agents(workdir: Path, messages: int, prior: int,
                     synchronous: Synchronous) -> AgentsResult:
    result = AgentsResult(messages, prior, {case: [] for case in CASES})
    paths = [workdir / f"agents-{n}.db" for n in range(len(CASES))]
    for path in paths:
        remove_db(path)
    async with SQLiteStore(paths[0], synchronous=synchronous) as one, \
            SQLiteStore(paths[1], synchronous=synchronous) as routed, \
            SQLiteStore(paths[2], synchronous=synchronous) as capped:
        for store in (one, routed, capped):
            await _fill(store, prior)
        async with Runtime(one, EchoProvider()) as a, \
                Runtime(routed, agents=_agents()) as b, \
                Runtime(capped, agents=_agents(), caps=CAPS) as c:
            runtimes = dict(zip(CASES, (a, b, c), strict=True))
            for i in range(messages):
                place = PLACES[i % len(PLACES)]
                thread = f"slack:T:{place}:{i % 20}"
                # No target: the replies stay in the thread (no channel to post them to).
                origin = Origin(channel="slack", user=f"U{i % 7}", place=(place,))
                order = CASES[i % 3:] + CASES[:i % 3]
                for case in order:
                    start = time.perf_counter()
                    run = await runtimes[case].send(thread, f"message {i}", origin=origin)
                    result.ms[case].append((time.perf_counter() - start) * 1000)
                    if run.state is not RunState.COMPLETED:
                        raise RuntimeError(f"{case}: message {i} ended {run.state}: "
                                           f"{run.error}")
    return result


def agents_rows(r: AgentsResult) -> list[Row]:
    name = f"13 agents, {r.messages} messages"
    base = sum(r.ms[CASES[0]]) / len(r.ms[CASES[0]])
    rows = [Row(name, f"ms/message, {CASES[0]} (baseline)", f"{base:.2f}")]
    for case in CASES[1:]:
        mean = sum(r.ms[case]) / len(r.ms[case])
        label = case if "caps" not in case else f"{case} over {r.prior:,} runs"
        rows.append(Row(name, f"ms/message, {label}", f"{mean:.2f}", f"{base:.2f}",
                        f"{mean / base:.2f}x"))
    return rows
