"""Issue 18's acceptance test: three `maiden run` replicas on one PostgreSQL database.

300 messages over 30 threads go through the HTTP API of random replicas; one replica is
kill -9'd while runs are in flight and started again later, another is stopped (SIGTERM)
and started again. Every message must be answered exactly once (one run per message),
each thread's answers in the order sent, and no tool effect repeated: the tools append
one line per effect to a file shared by every process, and each key appears once.

The client does what a client behind a load balancer does: a message whose request
failed (the connection dropped, a 503, a 202 from a stopping replica) is sent again, to
another replica, with the same ``Idempotency-Key``, which gives back the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.postgres import PG_DSN, fresh_schema

ROOT = Path(__file__).resolve().parents[2]
# One of the "heavy" group (pyproject addopts): run one at a time on one worker, so that
# no two of them starve each other of the two cores.
pytestmark = pytest.mark.xdist_group("heavy")
TOKEN = "tok-" + "5" * 32
THREADS = 30
PER_THREAD = 10
KILL_AT = 60  # answers: kill -9 a replica, then start it again at once
RESTART_AT = 120  # answers: SIGTERM another, then start it again
WORKLOAD_S = 150.0  # the whole conversation, every restart included
REQUEST_S = 30.0  # one HTTP request (a wait for a reply included)
MAX_ATTEMPTS = 40  # sends of one message

# The effects file is shared by every replica: one line per effect, written with
# O_APPEND and fsynced. `note` honours its key as an idempotent API would (a second call
# with the same key changes nothing); `charge` is a payment: called twice, it charges
# twice, so only its reconcile hook may stand in for a call after a crash. Every
# execution of either is also logged to calls.log, to explain a failure.
TOOLS = '''
import fcntl
import os
import time
from pathlib import Path

from runtime import NOT_DONE, ToolContext, tool

HERE = Path(__file__).resolve().parent
EFFECTS = HERE / "effects.log"
CALLS = HERE / "calls.log"
LOCK = HERE / "effects.lock"
# A call takes time, as real ones do: a replica may die before its effect, or after it
# and before its result is recorded.
BEFORE_S, AFTER_S = 0.1, 0.05


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _effect(key: str) -> list[str] | None:
    if not EFFECTS.exists():
        return None
    for line in EFFECTS.read_text().splitlines():
        fields = line.split("\\t")
        if fields[3] == key:
            return fields
    return None


def _called(name: str, ctx: ToolContext, thread: str, n: int) -> None:
    _append(CALLS, f"{name}\\t{thread}\\t{n}\\t{ctx.idempotency_key}\\t{ctx.run_id}\\t"
                   f"{os.getpid()}\\n")


@tool(effect="idempotent_write")
def note(ctx: ToolContext, thread: str, n: int) -> str:
    """Write a note, once per idempotency key."""
    _called("note", ctx, thread, n)
    time.sleep(BEFORE_S)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _effect(ctx.idempotency_key) is None:
            _append(EFFECTS, f"note\\t{thread}\\t{n}\\t{ctx.idempotency_key}\\t{ctx.run_id}\\n")
    time.sleep(AFTER_S)
    return f"noted {thread}#{n}"


@tool(effect="non_idempotent")
def charge(ctx: ToolContext, thread: str, n: int) -> str:
    """Charge a customer: every call is a payment."""
    _called("charge", ctx, thread, n)
    time.sleep(BEFORE_S)
    _append(EFFECTS, f"charge\\t{thread}\\t{n}\\t{ctx.idempotency_key}\\t{ctx.run_id}\\n")
    time.sleep(AFTER_S)
    return f"charged {thread}#{n}"


@charge.reconcile
def _(ctx: ToolContext):
    found = _effect(ctx.idempotency_key)
    return NOT_DONE if found is None else f"charged {found[1]}#{found[2]}"
'''

CONFIG = '''
[agent]
name = "replicas"

[store]
kind = "postgres"
dsn_env = "MAIDEN_TEST_REPLICAS_DSN"
schema = "{schema}"
pool_size = 4

[runtime]
concurrency = "{concurrency}"
poll_interval_s = 0.1
shutdown_grace_s = 2

[http]
port = 0
token_env = "MAIDEN_TEST_HTTP_TOKEN"

[tools]
modules = ["effects"]
'''


@dataclass
class Message:
    thread: str
    n: int
    tool: str | None  # "note", "charge" or None (echoed)

    @property
    def text(self) -> str:
        if self.tool is None:
            return f"{self.thread} message {self.n}"
        return f"/tool {self.tool} " + json.dumps({"thread": self.thread, "n": self.n})

    @property
    def reply(self) -> str:
        if self.tool == "note":
            return f'note returned "noted {self.thread}#{self.n}"'
        if self.tool == "charge":
            return f'charge returned "charged {self.thread}#{self.n}"'
        return f"echo: {self.text}"


@dataclass
class Sent:
    """What the client saw of one message."""

    message: Message
    key: str
    run_id: str | None = None
    reply: str | None = None
    answered_by: str | None = None
    attempts: list[str] = field(default_factory=list)


class Replica:
    """`maiden --log-format json run` as a subprocess, its stderr in ``log``."""

    def __init__(self, name: str, home: Path, log: Path) -> None:
        self.name = name
        self.home = home
        self.log = log
        self.url = ""
        self.stopping = False  # SIGTERM sent or killed: a 202 from it is expected
        self.waiting = 0  # requests the client has sent it that are not answered yet
        self.banner: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 60.0) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_TEST_HTTP_TOKEN": TOKEN,
               "MAIDEN_TEST_REPLICAS_DSN": PG_DSN}
        with self.log.open("a") as stderr:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "--log-format", "json", "run", cwd=self.home,
                env=env, stdout=asyncio.subprocess.PIPE, stderr=stderr)
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout_s):
            while not (self.banner and self.banner[-1].startswith("Ready.")):
                line = await self.proc.stdout.readline()
                if not line:
                    raise AssertionError(f"{self.name} exited before Ready:\n"
                                         + "".join(self.banner) + tail(self.log))
                self.banner.append(line.decode())
        http = next(line for line in self.banner if line.startswith("  http "))
        self.url = http.split()[1]
        assert self.url.startswith("http://127.0.0.1:"), self.url
        self._drain = asyncio.create_task(self._read_rest())  # never let stdout fill up

    async def _read_rest(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.banner.append(line.decode())

    async def kill(self) -> None:
        """SIGKILL, and reap it: a zombie's pid still answers kill(pid, 0)."""
        assert self.proc is not None
        self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await asyncio.wait_for(self.proc.wait(), 30)

    async def stop(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        self.stopping = True
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), timeout_s)

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            await self.kill()
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)


def tail(log: Path, lines: int = 12) -> str:
    """A log's warnings and errors (the first 30, cut short) and its last ``lines``."""
    if not log.exists():
        return f"({log.name}: no log)\n"
    text = log.read_text(errors="replace").splitlines()
    loud = [line[:400] for line in text if '"level": "info"' not in line][:30]
    return (f"--- {log.name}: {len(loud)} warning/error lines (at most 30)\n"
            + "\n".join(loud) + f"\n--- {log.name}: last {lines} lines\n"
            + "\n".join(line[:400] for line in text[-lines:]) + "\n")


def thread_url(thread: str, suffix: str = "") -> str:
    return f"/v1/threads/{quote(thread, safe='').replace('.', '%2E')}{suffix}"


def conversation() -> dict[str, list[Message]]:
    """30 threads of 10 messages: a third echoed, a third `note`, a third `charge`."""
    kinds: list[str | None] = [None, "note", "charge"]
    threads = {}
    for t in range(THREADS):
        thread = f"replica-t{t:02d}"
        threads[thread] = [Message(thread, n, kinds[(n + t) % 3]) for n in range(PER_THREAD)]
    return threads


@contextlib.contextmanager
def tails_on_failure(replicas: list[Replica], home: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for replica in replicas:
            code = replica.proc.returncode if replica.proc else None
            print(f"=== {replica.name} at {replica.url} (exit code {code})")
            print(tail(replica.log))
        print(tail(home / "calls.log", 20))
        raise


@contextlib.asynccontextmanager
async def cluster(home: Path, logs: Path) -> AsyncIterator[list[Replica]]:
    """Three replicas, started together (each to its Ready line: they migrate the new
    schema at once); every one started here is killed at the end, whatever happened."""
    replicas = [Replica(name, home, logs / f"{name}.log") for name in ("r0", "r1", "r2")]
    try:
        await asyncio.gather(*(r.start() for r in replicas))
        yield replicas
    finally:
        await asyncio.gather(*(r.close() for r in replicas), return_exceptions=True)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("concurrency", ["thread", "global"])
async def test_three_replicas_one_killed_one_restarted(
    tmp_path: Path, concurrency: str
) -> None:
    async with fresh_schema() as schema:  # skips, with one line, without a server
        home = tmp_path / "home"
        home.mkdir()
        (home / "effects.py").write_text(TOOLS)
        (home / "agent.toml").write_text(CONFIG.format(schema=schema, concurrency=concurrency))
        seed = random.randrange(1 << 30)
        print(f"seed {seed}")
        rng = random.Random(seed)
        threads = conversation()
        prefix = os.urandom(4).hex()
        sent = {(m.thread, m.n): Sent(m, key=f"{prefix}:{m.thread}:{m.n}")
                for messages in threads.values() for m in messages}

        async with cluster(home, tmp_path) as replicas, \
                httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_S, connect=5.0),
                                  limits=httpx.Limits(max_connections=100),
                                  headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            with tails_on_failure(replicas, home):
                live = list(replicas)
                answered = 0
                milestones = {KILL_AT: asyncio.Event(), RESTART_AT: asyncio.Event()}
                victims: list[Replica] = []
                early: list[str] = []  # 202s to a wait from a replica that was not stopping

                async def send(item: Sent) -> None:
                    nonlocal answered
                    m = item.message
                    for _ in range(MAX_ATTEMPTS):
                        replica = rng.choice(live)
                        replica.waiting += 1
                        try:
                            response = await client.post(
                                replica.url + thread_url(m.thread, "/messages"),
                                json={"text": m.text}, headers={"Idempotency-Key": item.key})
                        except httpx.TransportError as exc:
                            item.attempts.append(f"{replica.name}: {type(exc).__name__}")
                            continue
                        finally:
                            replica.waiting -= 1
                        if response.status_code == 503:  # stopping: send it elsewhere
                            item.attempts.append(f"{replica.name}: 503")
                            continue
                        assert response.status_code in (200, 202), (
                            replica.name, response.status_code, response.text)
                        body = response.json()
                        assert item.run_id in (None, body["run_id"]), (item, body)
                        item.run_id = body["run_id"]
                        item.attempts.append(f"{replica.name}: {response.status_code} "
                                             f"{body['state']} ({body['reason']})")
                        if response.status_code == 202:
                            if not replica.stopping:
                                early.append(f"{m.thread}#{m.n} {item.attempts[-1]}")
                            continue  # still going: wait for it again, through the key
                        assert body["state"] == "completed", (item, body)
                        item.reply = body["reply"]
                        item.answered_by = replica.name
                        answered += 1
                        for at, reached in milestones.items():
                            if answered >= at:
                                reached.set()
                        return
                    raise AssertionError(f"{m.thread}#{m.n}: no answer after "
                                         f"{MAX_ATTEMPTS} sends: {item.attempts}")

                async def talk(thread: str) -> None:
                    for m in threads[thread]:  # in order: the next once this one answered
                        await send(sent[(m.thread, m.n)])

                async def again(name: str) -> None:
                    replica = Replica(name, home, tmp_path / f"{name}.log")
                    replicas.append(replica)
                    began = time.monotonic()
                    await replica.start()
                    live.append(replica)
                    recovered = next(line for line in replica.banner
                                     if line.startswith("  recovered"))
                    print(f"{name} ready at {answered} answers, "
                          f"{time.monotonic() - began:.1f} s after its start: "
                          f"{recovered.strip()}")

                async def crash() -> None:
                    # The replica with the most requests waiting on it is killed, so runs
                    # are surely cut off; it is started again at once, as a supervisor would.
                    await milestones[KILL_AT].wait()
                    victim = max(live, key=lambda r: r.waiting)
                    live.remove(victim)
                    print(f"{victim.name} killed at {answered} answers, with "
                          f"{victim.waiting} request(s) waiting on it")
                    await victim.kill()
                    victims.append(victim)
                    await again(f"{victim.name}-again")

                async def restart() -> None:
                    # Another one is stopped (SIGTERM) and started again, a rolling deploy:
                    # while the crashed one may still be starting.
                    await milestones[RESTART_AT].wait()
                    stopped = max((r for r in live if r in replicas[:3]),
                                  key=lambda r: r.waiting)
                    live.remove(stopped)
                    print(f"{stopped.name} stopping at {answered} answers, with "
                          f"{stopped.waiting} request(s) waiting on it")
                    assert await stopped.stop() == 0, tail(stopped.log)
                    await again(f"{stopped.name}-again")

                started = time.monotonic()
                async with asyncio.timeout(WORKLOAD_S), asyncio.TaskGroup() as group:
                    for work in (crash(), restart(), *(talk(t) for t in threads)):
                        group.create_task(work)
                print(f"{len(sent)} messages answered in {time.monotonic() - started:.1f} s "
                      f"({concurrency}); {sum(len(s.attempts) for s in sent.values())} sends")
                # The kill really cut runs off: some messages were in flight on the victim.
                (victim,) = victims
                cut = [s for s in sent.values()
                       if any(a.startswith(f"{victim.name}: ") and "Error" in a
                              for a in s.attempts)]
                print(f"{len(cut)} message(s) cut off by the kill, "
                      f"{sum(1 for s in sent.values() if len(s.attempts) > 1)} sent again; "
                      f"early 202s: {early}; answers by replica: "
                      f"{sorted(Counter(s.answered_by for s in sent.values()).items())}")
                for item in [s for s in sent.values() if len(s.attempts) > 1][:12]:
                    print(f"  {item.message.thread}#{item.message.n}: {item.attempts}")
                assert cut, f"no message was in flight on {victim.name} when it was killed"

                stored = await read_store(client, live[-1], threads)
                check(threads, sent, stored, home)
                assert not early, (
                    f"{len(early)} wait=true request(s) answered 202 by a replica that was not "
                    f"stopping (the API answers such a request once the run ended or paused, "
                    f"or when the server stops): {early}")


async def read_store(
    client: httpx.AsyncClient, replica: Replica, threads: dict[str, list[Message]]
) -> dict[str, Any]:
    """Every thread's entries and runs, and every run that has not completed."""
    out: dict[str, Any] = {"threads": {}}
    for thread in threads:
        response = await client.get(replica.url + thread_url(thread),
                                    params={"limit": 1000, "runs_limit": 500})
        assert response.status_code == 200, response.text
        out["threads"][thread] = response.json()
    unfinished = await client.get(replica.url + "/v1/runs", params={
        "state": ["queued", "running", "awaiting_tool", "awaiting_approval", "failed",
                  "cancelled", "timed_out"], "limit": 500})
    assert unfinished.status_code == 200, unfinished.text
    out["unfinished"] = unfinished.json()["runs"]
    every = await client.get(replica.url + "/v1/runs", params={"limit": 500})
    assert every.status_code == 200, every.text
    out["runs"] = every.json()["runs"]
    return out


def check(threads: dict[str, list[Message]], sent: dict[tuple[str, int], Sent],
          stored: dict[str, Any], home: Path) -> None:
    """Every message answered once and right, in order, and every effect taken once."""
    problems: list[str] = []
    # Nothing stuck, nothing failed; one run per message, no more.
    problems += [f"run {r['run_id']} on {r['thread_id']!r} is {r['state']} ({r['reason']})"
                 for r in stored["unfinished"]]
    total = THREADS * PER_THREAD
    if len(stored["runs"]) != total:
        problems.append(f"{len(stored['runs'])} runs in the store for {total} messages")

    calls: dict[str, str] = {}  # run id -> the key of its tool call
    for thread, messages in threads.items():
        detail = stored["threads"][thread]
        runs = {r["run_id"]: r for r in detail["runs"]}
        if detail["runs_total"] != PER_THREAD:
            problems.append(f"{thread}: {detail['runs_total']} runs for {PER_THREAD} messages")
        for m in messages:
            item = sent[(m.thread, m.n)]
            run = runs.get(item.run_id or "")
            if item.reply != m.reply:
                problems.append(f"{thread}#{m.n}: answered {item.reply!r}, not {m.reply!r}")
            if run is None:
                problems.append(f"{thread}#{m.n}: its run {item.run_id} is not in the thread")
            elif run["state"] != "completed" or run["reply"] != m.reply:
                problems.append(f"{thread}#{m.n}: run {run['run_id']} is {run['state']} "
                                f"with {run['reply']!r}")
        # The history: each message's entries together, in the order sent, each answered
        # once (one user entry, one final answer; a tool call and its result in between).
        entries = detail["entries"]["items"]
        if detail["entries"]["next_offset"] is not None:
            problems.append(f"{thread}: more entries than one page")
        order = list(dict.fromkeys(e["run_id"] for e in entries))
        expected = [sent[(m.thread, m.n)].run_id for m in messages]
        if order != expected:
            problems.append(f"{thread}: runs in the history in the order {order}, "
                            f"sent as {expected}")
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in entries:
            by_run[e["run_id"]].append(e)
        for m in messages:
            run_id = sent[(m.thread, m.n)].run_id or ""
            mine = [e for e in by_run[run_id] if e["kind"] != "notice"]
            kinds = [e["kind"] for e in mine]
            want = ["user", "assistant", "tool_result", "assistant"] if m.tool \
                else ["user", "assistant"]
            if kinds != want:
                problems.append(f"{thread}#{m.n}: entries {kinds}, expected {want}")
                continue
            if mine[0]["text"] != m.text or mine[-1]["text"] != m.reply \
                    or mine[-1]["tool_calls"]:
                problems.append(f"{thread}#{m.n}: history {mine[0]['text']!r} -> "
                                f"{mine[-1]['text']!r}")
            if m.tool:
                (call,) = mine[1]["tool_calls"]
                calls[run_id] = hashlib.sha256((run_id + call["id"]).encode()).hexdigest()

    # The effects: one line per tool message, by its run's own call; no key twice.
    lines = [line.split("\t") for line in (home / "effects.log").read_text().splitlines()]
    keys = Counter(f[3] for f in lines)
    problems += [f"effect key {k} written {c} times" for k, c in keys.items() if c > 1]
    effects = Counter((f[0], f[1], int(f[2])) for f in lines)
    for thread, messages in threads.items():
        for m in messages:
            count = effects.pop((m.tool, thread, m.n), 0) if m.tool else 0
            if m.tool and count != 1:
                problems.append(f"{thread}#{m.n}: {m.tool} took effect {count} times")
    problems += [f"an effect nobody asked for: {k}" for k in effects]
    for f in lines:
        if calls.get(f[4]) != f[3]:
            problems.append(f"effect {f} is not the call of its run's history")
    executions = Counter(line.split("\t")[3]
                         for line in (home / "calls.log").read_text().splitlines())
    again = {k: c for k, c in executions.items() if c > 1}
    print(f"{len(lines)} effects; calls executed more than once (same key): {again}")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:60])
