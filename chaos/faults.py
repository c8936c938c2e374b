"""Faults at the plan's times, a watch on replicas that die on their own, and the settle:
every fault off, every replica up, no run left to drive."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Coroutine
from typing import Any, Protocol

from .fault_plan import Fault
from .launch import SKEW_FILE
from .model import Model
from .outages import Outage
from .plan import Plan
from .proxy import Proxy
from .system import History, Replica

__all__ = ["Faults", "Platform", "Resumer"]


class Platform(Protocol):
    """A chat platform's fake that can misbehave for a while (Slack, Discord)."""

    async def misbehave(self, mode: str, seconds: float, *, status: int = ...,
                        retry_after: int = ..., delay_s: float = ...) -> None: ...


class Resumer(Protocol):
    """The Discord gateway sent away to RESUME (chaos/discord_resume.py)."""

    def ready(self) -> bool: ...

    async def run(self, fault: Fault) -> None: ...


class Faults:
    def __init__(self, plan: Plan, replicas: list[Replica], model: Model, proxy: Proxy | None,
                 history: History) -> None:
        self.plan = plan
        self.replicas = replicas
        self.model = model
        self.proxy = proxy
        self.history = history
        self.done: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self._busy: set[str] = set()
        """Replicas being stopped and started again: one sequence at a time each (seed 10606:
        a planned kill and a held download's kill of r0 at once started two r0 processes,
        the first left running unseen, its port and its disk held)."""
        self.surprises: list[str] = []  # replicas that died, or would not stop or start
        self._restarts: set[asyncio.Task[None]] = set()
        self._unskews: dict[str, asyncio.Task[None]] = {}  # replica -> its clock put right
        self.platforms: dict[str, Platform] = {}  # "slack", "discord": their fakes
        self._calming: dict[str, asyncio.Task[None]] = {}  # platform -> its fault's end
        self.last_death = 0.0  # when a replica last stopped or died (time.monotonic())
        self.outages: dict[str, Outage] = {}  # "pg_restart", "disk_full": where possible
        self.resumer: Resumer | None = None  # with Discord: its gateway RESUMEd

    async def run(self) -> None:
        """Every fault of the plan at its time (returns after the last one began)."""
        for fault in self.plan.faults:
            await asyncio.sleep(max(0.0, fault.at - self.history.now()))
            await self._inject(fault)

    async def _inject(self, fault: Fault) -> None:
        if fault.kind in ("kill", "term"):
            replica = self.replicas[fault.replica]
            if not replica.up or replica.name in self._busy:
                self.skipped[fault.kind] += 1
                self.history.note(fault.kind, f"{replica.name}: skipped, it is not up")
                return
            pid = replica.proc.pid if replica.proc else "?"
            self.history.note(fault.kind, f"{replica.name} (pid {pid}), back in "
                              f"{fault.duration_s}s")
            self._later(self._stop_and_restart(replica, fault))
        elif fault.kind == "pg_cut" and self.proxy is not None:
            cut = self.proxy.cut()
            self.history.note("pg_cut", f"{cut} connection(s) cut, refused for "
                              f"{fault.duration_s}s")
            self._later(self._restore(fault.duration_s))
        elif fault.kind == "skew":
            replica = self.replicas[fault.replica]
            self._skew(replica, fault.skew_s)
            self.history.note("skew", f"{replica.name} {fault.skew_s:+.3f}s for "
                              f"{fault.duration_s}s (maiden's clock)")
            self._unskews[replica.name] = asyncio.create_task(
                self._unskew(replica, fault.duration_s))
        elif fault.kind in ("slack", "discord") and fault.kind in self.platforms:
            what = {"down": "down", "slow": f"slow ({fault.delay_s}s a request)",
                    "status": f"answering {fault.status}"}[fault.mode]
            await self.platforms[fault.kind].misbehave(
                fault.mode, fault.duration_s, status=fault.status, delay_s=fault.delay_s)
            self.history.note(fault.kind, f"{what} for {fault.duration_s}s")
            self._calming[fault.kind] = asyncio.create_task(
                self._calm(fault.kind, fault.duration_s))
        elif fault.kind == "discord_resume" and self.resumer is not None:
            if not self.resumer.ready():
                self.skipped[fault.kind] += 1
                self.history.note(fault.kind, "skipped: no live gateway connection")
                return
            self._later(self.resumer.run(fault))
        elif fault.kind in self.outages:
            if not await self._outage(fault):
                return
        elif fault.kind == "model_outage":
            self.model.outage_until = time.monotonic() + fault.duration_s
            self.model.outage_status = fault.status
            self.history.note("model_outage", f"{fault.status} for {fault.duration_s}s")
        else:
            self.skipped[fault.kind] += 1
            return
        self.done[fault.kind] += 1

    async def _outage(self, fault: Fault) -> bool:
        """Begin a store outage, its end ``duration_s`` later; False if it could not."""
        outage = self.outages[fault.kind]
        self.history.note(fault.kind, outage.what(fault))
        try:
            await outage.begin(fault)
        except (OSError, RuntimeError) as exc:
            self.surprises.append(f"{self.history.now():.1f}s {fault.kind} failed: {exc}")
            self.skipped[fault.kind] += 1
            await self._outage_over(fault.kind, 0.0)
            return False
        self._later(self._outage_over(fault.kind, fault.duration_s))
        return True

    async def _outage_over(self, kind: str, after_s: float) -> None:
        await asyncio.sleep(after_s)
        outage = self.outages[kind]
        try:
            done = await outage.end()
        except (OSError, RuntimeError) as exc:  # tried again at the settle
            self.surprises.append(f"{self.history.now():.1f}s {kind} could not end: {exc}")
            return
        if done is not None:
            self.history.note(outage.ends, done)

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    def kill_now(self, replica: Replica, why: str, down_s: float = 1.0) -> None:
        """SIGKILL ``replica`` now, for ``why`` rather than at a planned time (it is noted
        as a kill, so the checks know it), restarted ``down_s`` later."""
        if not replica.up or replica.name in self._busy:
            return
        pid = replica.proc.pid if replica.proc else "?"
        self.history.note("kill", f"{replica.name} (pid {pid}) {why}, back in {down_s}s")
        self.done["kill (held)"] += 1
        self._later(self._stop_and_restart(replica, Fault(round(self.history.now(), 3), "kill",
                                                          replica.index, down_s)))

    async def restart(self, replica: Replica, why: str) -> None:
        """SIGTERM ``replica`` now, for ``why``, and start it again a second later."""
        self.history.note("term", f"{replica.name} {why}")
        await self._stop_and_restart(replica, Fault(round(self.history.now(), 3), "term",
                                                    replica.index, 1.0))

    async def _stop_and_restart(self, replica: Replica, fault: Fault) -> None:
        if replica.name in self._busy:
            return
        self._busy.add(replica.name)
        try:
            await self._stop_and_start(replica, fault)
        finally:
            self._busy.discard(replica.name)

    async def _stop_and_start(self, replica: Replica, fault: Fault) -> None:
        self.last_death = time.monotonic()
        if fault.kind == "kill":
            await replica.kill()
        else:
            try:
                code = await replica.term()
            except TimeoutError:
                self.surprises.append(f"{self.history.now():.1f}s {replica.name} did not stop "
                                      "within 30 s of SIGTERM (killed)")
                self.history.note("term", f"{replica.name}: still running 30 s later, killed")
            else:
                self.history.note("term", f"{replica.name} exited {code}")
                if code != 0:
                    self.surprises.append(f"{self.history.now():.1f}s {replica.name} exited "
                                          f"{code} on SIGTERM")
        await asyncio.sleep(fault.duration_s)
        await self.start(replica)

    async def start(self, replica: Replica) -> None:
        for attempt in range(5):
            try:
                await replica.start()
            except (RuntimeError, TimeoutError) as exc:
                self.surprises.append(f"{self.history.now():.1f}s {replica.name} failed to "
                                      f"start: {str(exc)[:300]}")
                self.history.note("start", f"{replica.name} failed to start ({attempt + 1})")
                await replica.close()
                if "Address already in use" in str(exc):
                    replica.move()
                await asyncio.sleep(1.0 + attempt)
                continue
            self.history.note("start", f"{replica.name} up (pid "
                              f"{replica.proc.pid if replica.proc else '?'})")
            return

    @staticmethod
    def _skew(replica: Replica, seconds: float) -> None:
        """Set ``replica``'s clock (maiden's: chaos/launch.py reads the file) off by
        ``seconds``, at once if it runs, from its start if not."""
        (replica.home / SKEW_FILE).write_text(f"{seconds}\n")

    async def _unskew(self, replica: Replica, after_s: float) -> None:
        await asyncio.sleep(after_s)
        self._skew(replica, 0.0)
        self._unskews.pop(replica.name, None)
        self.history.note("unskew", f"{replica.name} clock right again")

    async def _calm(self, kind: str, after_s: float) -> None:
        await asyncio.sleep(after_s)  # the fake is well again by itself: noted
        self._calming.pop(kind, None)
        self.history.note(f"{kind}_end", "well again")

    async def _restore(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if self.proxy is not None:
            self.proxy.restore()
        self.history.note("pg_restore", "connections accepted again")

    async def watch(self) -> None:
        """Restart a replica that died without being told to (and say so)."""
        while True:
            await asyncio.sleep(0.5)
            for replica in self.replicas:
                proc = replica.proc
                if replica.up and proc is not None and proc.returncode is not None \
                        and replica.name not in self._busy:
                    replica.up, self.last_death = False, time.monotonic()
                    self.surprises.append(f"{self.history.now():.1f}s {replica.name} died on "
                                          f"its own (exit {proc.returncode}); see "
                                          f"{replica.log}")
                    self.history.note("died", f"{replica.name} exit {proc.returncode}")
                    await replica.close()
                    self._later(self.start(replica))

    async def stop(self) -> None:
        """Cancel the stops and restarts under way."""
        tasks = [*self._restarts, *self._unskews.values(), *self._calming.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def quiet(self) -> None:
        """Faults off: the proxy open, the store back, the model well, every replica up."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(90):
                while self._restarts:
                    await asyncio.gather(*self._restarts, return_exceptions=True)
        if self.proxy is not None:
            self.proxy.restore()
        for kind in self.outages:
            await self._outage_over(kind, 0.0)
        self.model.outage_until = 0.0
        for name, task in list(self._unskews.items()):
            task.cancel()
            self.history.note("unskew", f"{name} clock right again")
        self._unskews.clear()
        for replica in self.replicas:
            self._skew(replica, 0.0)
        for kind, task in list(self._calming.items()):
            task.cancel()
            await self.platforms[kind].misbehave("status", 0.0)  # over at once
            self.history.note(f"{kind}_end", "well again")
        self._calming.clear()
        for replica in self.replicas:
            if not replica.up:
                await replica.close()
                await self.start(replica)
        self.history.note("settle", "faults off, every replica up")
