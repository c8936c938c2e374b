"""A message as its person saw it: the ``Sent`` record of what the client saw (kept for the
invariants), and the lookups a person makes about its run afterwards (its run found by its
text, the run as the store has it now, the run a stop ends, the call it waits on), each
through the HTTP API at whichever replica is up.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import httpx

from .client import Answer, Client
from .plan import Op
from .system import Replica

__all__ = ["Lookups", "Sent"]


@dataclass
class Sent:
    op: Op
    key: str
    thread: str = ""  # the maiden thread (a Slack thread's is known once it is posted)
    run_id: str | None = None
    acked: bool = False  # a Slack event a replica acked
    accepted_at: float | None = None
    answered_at: float | None = None
    answers: list[Answer] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    refused: str | None = None
    turned_down: str | None = None  # refused as expected: it carried a file maiden refuses
    cancelled: list[int] = field(default_factory=list)
    decided: list[tuple[bool, int]] = field(default_factory=list)
    open_streams: list[str] = field(default_factory=list)
    typed: int = 0
    """``maiden send`` attempts that may have made a run (each a message of its own: the
    command has no key; a person who could not tell whether it was taken types it again)."""


class Lookups:
    """A person's lookups through the HTTP API, at whichever replica is up."""

    def __init__(self, replicas: list[Replica], client: Client) -> None:
        self.replicas = replicas
        self.client = client

    def pick(self, start: int) -> Replica | None:
        n = len(self.replicas)
        for i in range(n):
            replica = self.replicas[(start + i) % n]
            if replica.up:
                return replica
        return None

    async def find(self, sent: Sent, timeout_s: float = 60.0) -> str | None:
        """The run of ``sent``, looked up by its text in its thread (a wait=true request
        names it only once the run has ended)."""
        async with asyncio.timeout(timeout_s):
            while sent.run_id is None:
                replica = self.pick(0)
                if replica is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        runs = await self.client.runs(replica.url, "ana",
                                                      thread_id=sent.thread)
                        for run in runs:
                            if run["text"] == sent.op.text:
                                return str(run["run_id"])
                await asyncio.sleep(0.2)
        return sent.run_id

    async def run_of(self, run_id: str) -> dict[str, Any] | None:
        """The run as the store has it now (None if no replica answers)."""
        for attempt in range(10):
            replica = self.pick(attempt)
            if replica is not None:
                with contextlib.suppress(httpx.HTTPError):
                    return await self.client.run(replica.url, "ana", run_id)
            await asyncio.sleep(0.3)
        return None

    async def first_active(self, thread: str) -> str | None:
        """The run a stop in ``thread`` ends now: its first one that has not ended."""
        for attempt in range(10):
            replica = self.pick(attempt)
            if replica is not None:
                with contextlib.suppress(httpx.HTTPError):
                    runs = await self.client.runs(replica.url, "ana", thread_id=thread, state=[
                        "queued", "running", "awaiting_tool", "awaiting_approval"])
                    first = min(runs, key=lambda r: r["created_at"], default=None)
                    return None if first is None else str(first["run_id"])
            await asyncio.sleep(0.3)
        return None

    async def awaiting(self, sent: Sent, run_id: str) -> str | None:
        """The deploy call the run waits on, once it waits (None if it ended first)."""
        async with asyncio.timeout(120):
            while True:
                replica = self.pick(2)
                if replica is not None:
                    with contextlib.suppress(httpx.HTTPError):
                        run = await self.client.run(replica.url, sent.op.person, run_id)
                        approval = run.get("approval")
                        if approval and approval["name"] == "deploy":
                            return str(approval["tool_call_id"])
                        if run["terminal"] and run["state"] != "timed_out":
                            return None
                await asyncio.sleep(0.3)
