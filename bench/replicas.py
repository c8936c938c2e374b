"""Workload 9: a replica scaling run (issue 18). Workload 4 (threads x messages, each user
waiting for the reply before the next; a model that takes 100 ms a call) through the HTTP
API of 1, 2, then 3 ``maiden run`` processes on one PostgreSQL schema.

Each replica is a real process (its own event loop and CPU) started as an operator would:
``python -m bot --log-format json run`` with ``[store] kind = "postgres"`` and
``[runtime] concurrency = "global"``: one run at a time per replica, so replicas are the
unit of scale and the ideal is ``replicas / (2 x latency)`` messages a second (two model
calls per message). A ``"thread"`` variant (each replica runs every thread at once:
ideal ``threads / (2 x latency)`` whatever the replicas) follows, with half the messages.
The whole workload is bounded (``budget_s``, 150 s): a phase that would run past it is cut
and says so, and the phases after it are listed as not measured.

The model is ``bench.latency_model``: an OpenAI-compatible server in a process of its own
that sleeps ``latency`` and answers as the workload's model does (a ``lookup`` call, then
the answer), streamed; the replicas use ``[provider] kind = "openai"`` with its
``base_url``, and a ``lookup`` tool module written next to their ``agent.toml``.

Message ``i`` of thread ``t`` goes to replica ``(t + i) % n``: the load is even, and each
thread's next message lands on another replica than the last (a load balancer without
affinity). Replicas are started one at a time between the phases (1 replica measured,
a second started, 2 measured, ...), each warmed by one message before it is measured; the
users get a fresh HTTP client each phase.

Besides messages/s each phase records where the CPU went (``/proc``: the whole machine,
each replica, the PostgreSQL server when it is local, the model's process, this process's
clients) and what the replicas' database connections were doing (``pg_stat_activity``
sampled every 0.25 s: running, waiting on I/O or locks, idle in a transaction, idle), the
server's commits and WAL syncs a second, and the model calls made (a retry shows as more
than two a message). After the run: every thread's entries counted (four a message), the
runs' states, and the warnings and errors in the replicas' logs.

The server is ``MAIDEN_BENCH_PG_DSN`` (as workload 8); a schema of its own, dropped after.
Without a server the workload says so in one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import urlsplit
from uuid import uuid4

import httpx

from runtime.stores.dsn import redact_dsn

from .postgres import PG_DSN
from .workload import RESULT, user_text

__all__ = ["DbActivity", "Phase", "ReplicasResult", "run_replicas"]

ROOT = Path(__file__).resolve().parent.parent
Mode = Literal["global", "thread"]

TOOLS = f'''"""The workload's tool, for the replicas (written by bench/replicas.py)."""
from runtime import tool


@tool
async def lookup(query: str) -> dict[str, str]:
    """Look a question up."""
    return {RESULT!r}
'''

AGENT_TOML = '''# written by bench/replicas.py
[agent]
name = "bench"

[provider]
kind = "openai"
model = "bench-latency"
base_url = "{base_url}"
api_key_env = "MAIDEN_BENCH_NO_KEY"
timeout_s = 30

[store]
kind = "postgres"
dsn_env = "MAIDEN_BENCH_REPLICA_DSN"
schema = "{schema}"

[runtime]
concurrency = "{mode}"

[tools]
builtins = []
modules = ["bench_tools"]

[http]
port = 0
token_env = "MAIDEN_BENCH_HTTP_TOKEN"
console = false
'''

READY_S = 60.0
"""The longest a replica may take to print its Ready line."""
STOP_S = 15.0
SAMPLE_S = 0.25
_TICK = os.sysconf("SC_CLK_TCK")


# -- what is measured --------------------------------------------------------------------


@dataclass
class DbActivity:
    """The replicas' connections to the server, averaged over the phase's samples: how many
    were doing what at a time."""

    samples: int = 0
    connections: float = 0.0
    running: float = 0.0
    """Executing a statement, not waiting."""
    io: float = 0.0
    """Waiting on I/O (WAL writes and fsyncs at commit: ``IO`` wait events)."""
    lock: float = 0.0
    """Waiting on a row or table lock (``Lock``: another transaction holds the row)."""
    lwlock: float = 0.0
    """Waiting on one of the server's own locks (``LWLock``: WAL insertion and writing,
    buffers)."""
    other_wait: float = 0.0
    idle_in_transaction: float = 0.0
    """Waiting for the replica: in a transaction between statements (``idle in
    transaction``), or mid-statement for its next protocol message (``Client`` waits)."""
    idle: float = 0.0
    """In the pool, unused."""
    waits: Counter[str] = field(default_factory=Counter)
    """``type:event`` of every wait seen, summed over the samples."""

    @property
    def busy(self) -> float:
        return self.running + self.io + self.lock + self.lwlock + self.other_wait


@dataclass
class Phase:
    mode: Mode
    replicas: int
    threads: int
    messages: int
    """Per thread."""
    latency_s: float
    elapsed_s: float = 0.0
    done: int = 0
    """Messages answered (their run completed)."""
    failed: list[str] = field(default_factory=list)
    timed_out: bool = False
    cut_by_budget: bool = False
    """Timed out at the workload's time budget rather than its own timeout."""
    machine_cores: float = 0.0
    """Cores busy over the phase, every process on the machine."""
    steal_cores: float = 0.0
    """Cores the hypervisor gave to someone else (a shared VM's steal time)."""
    replica_cores: list[float] = field(default_factory=list)
    postgres_cores: float | None = None
    """The local server's processes (all of them: any other client's work too)."""
    backend_cores: float | None = None
    """The server's backends of the replicas' own connections (those seen by the
    sampler): the database's work for this workload alone."""
    model_cores: float = 0.0
    client_cores: float = 0.0
    """This process: the users' HTTP clients and the samplers."""
    db: DbActivity | None = None
    backends: int = 0
    """The replicas' connections seen (each a backend process on the server)."""
    commits_per_s: float | None = None
    wal_syncs_per_s: float | None = None
    model_calls: int = 0
    model_connections: int = 0
    """TCP connections the replicas opened to the model server during the phase."""

    @property
    def per_second(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def ideal_per_second(self) -> float:
        parallel = min(self.replicas, self.threads) if self.mode == "global" else self.threads
        return parallel / (2 * self.latency_s)

    @property
    def db_cores(self) -> float | None:
        """The database's work for this workload: its backends when they were seen, else
        the whole server's."""
        return self.backend_cores if self.backend_cores is not None else self.postgres_cores

    @property
    def ours_cores(self) -> float:
        return (sum(self.replica_cores) + (self.db_cores or 0.0) + self.model_cores
                + self.client_cores)


@dataclass
class ReplicasResult:
    where: str
    threads: int
    messages: int
    latency_s: float
    cores: int
    phases: list[Phase] = field(default_factory=list)
    skipped: str | None = None
    startup_s: list[float] = field(default_factory=list)
    """Each replica's start, until its Ready line."""
    exit_codes: list[int | None] = field(default_factory=list)
    """Each replica's exit status after SIGTERM (None: killed after STOP_S)."""
    log_problems: list[tuple[int, str]] = field(default_factory=list)
    """(count, "level logger: message") for every warning and error in the replicas' logs,
    ids masked; non-JSON lines too."""
    wrong_threads: int | None = None
    """Threads whose entries are not four a message (None: not checked)."""
    run_states: dict[str, int] = field(default_factory=dict)
    model_requests: int = 0
    """Every request the model server saw, warm-ups included."""
    model_connections: int = 0
    budget_s: float = 0.0
    not_measured: list[str] = field(default_factory=list)
    """Phases left out: the workload's time budget was spent."""
    checked_threads: int = 0


# -- /proc ---------------------------------------------------------------------------------


def _stat_fields(pid: int | str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _proc_seconds(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of a process (with ``reaped``: and of its children it has waited for)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICK


def _machine() -> tuple[float, float, float]:
    """(busy, steal, all) CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy / _TICK, steal / _TICK, (busy + idle + iowait + steal) / _TICK


def _postmaster() -> int | None:
    """The local PostgreSQL server's main process, if there is one."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if fields is not None and comm in ("postgres", "postmaster") and fields[1] == "1":
            return int(entry.name)
    return None


def _postgres_seconds(postmaster: int) -> float:
    """The server's CPU seconds: the postmaster, its live children (backends, WAL writer,
    ...) and the children that have exited (reaped by the postmaster)."""
    total = _proc_seconds(postmaster, reaped=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields is not None and fields[1] == str(postmaster):
                total += _proc_seconds(int(entry.name))
    return total


def _client_ports(pids: Sequence[int], server_port: int) -> list[int]:
    """The local ports of the TCP connections these processes hold to ``server_port``:
    what ``pg_stat_activity.client_port`` shows for their backends."""
    inodes: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[9] in inodes \
                        and int(parts[2].rsplit(":", 1)[1], 16) == server_port:
                    ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class _Cpu:
    at: float
    machine: tuple[float, float, float]
    replicas: list[float]
    postgres: float | None
    model: float
    client: float


def _cpu(replicas: Sequence[int], postmaster: int | None, model: int) -> _Cpu:
    return _Cpu(at=time.perf_counter(), machine=_machine(),
                replicas=[_proc_seconds(p) for p in replicas],
                postgres=None if postmaster is None else _postgres_seconds(postmaster),
                model=_proc_seconds(model), client=_proc_seconds(os.getpid()))


# -- processes -----------------------------------------------------------------------------


@dataclass
class _Process:
    argv: list[str]
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    files: list[IO[bytes]]

    def close_files(self) -> None:
        for f in self.files:
            f.close()


def _spawn(argv: Sequence[str], cwd: Path, env: dict[str, str], name: str) -> _Process:
    out, err = cwd / f"{name}.out", cwd / f"{name}.log"
    files: list[IO[bytes]] = [out.open("wb"), err.open("wb")]
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=files[0], stderr=files[1])
    return _Process(list(argv), proc, out, err, files)


async def _wait_for_line(p: _Process, prefix: str, timeout_s: float) -> list[str]:
    """The process's stdout up to its first line starting with ``prefix``."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = p.out.read_text().splitlines()
        if any(line.startswith(prefix) for line in lines):
            return lines
        if p.proc.poll() is not None or time.monotonic() > deadline:
            tail = p.err.read_text()[-1500:]
            why = f"exited {p.proc.returncode}" if p.proc.returncode is not None \
                else f"no {prefix!r} line within {timeout_s:g} s"
            raise RuntimeError(f"{' '.join(p.argv[1:])}: {why}\n{tail}")
        await asyncio.sleep(0.05)


async def _stop(p: _Process) -> int | None:
    """SIGTERM, up to ``STOP_S``, then SIGKILL; the exit status (None when killed)."""
    code: int | None = p.proc.poll()
    if code is None:
        p.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = await asyncio.to_thread(p.proc.wait, STOP_S)
    _kill(p)
    return code


def _kill(p: _Process) -> None:
    if p.proc.poll() is None:
        p.proc.kill()
        p.proc.wait(timeout=10)
    p.close_files()


def _env(token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and k != "MAIDEN_BENCH_NO_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MAIDEN_BENCH_REPLICA_DSN"] = PG_DSN
    env["MAIDEN_BENCH_HTTP_TOKEN"] = token
    return env


@dataclass
class _Replica:
    process: _Process
    url: str


def _write_home(home: Path, *, schema: str, mode: Mode, base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "bench_tools.py").write_text(TOOLS)
    (home / "agent.toml").write_text(AGENT_TOML.format(base_url=base_url, schema=schema,
                                                       mode=mode))


async def _start_replica(home: Path, env: dict[str, str], *, schema: str, mode: Mode,
                         base_url: str) -> tuple[_Replica, float]:
    _write_home(home, schema=schema, mode=mode, base_url=base_url)
    started = time.perf_counter()
    p = _spawn([sys.executable, "-m", "bot", "--log-format", "json", "run"], home, env,
               "replica")
    try:
        lines = await _wait_for_line(p, "Ready.", READY_S)
    except BaseException:
        _kill(p)
        raise
    http = next(line for line in lines if line.startswith("  http "))
    return _Replica(p, http.split()[1]), time.perf_counter() - started


# -- the database's side -------------------------------------------------------------------


class _Db:
    """A connection of the bench's own to the server: activity samples and counters."""

    def __init__(self, conn: Any, server_port: int) -> None:
        self.conn = conn
        self.server_port = server_port

    async def counters(self) -> tuple[int, int] | None:
        """(commits in this database, WAL syncs) since the server's stats were reset."""
        try:
            commits = await self.conn.fetchval(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            syncs = await self.conn.fetchval("SELECT wal_sync FROM pg_stat_wal")
        except Exception:
            return None
        return int(commits), int(syncs)

    async def backends(self, pids: Sequence[int]) -> list[int]:
        """The server processes serving these processes' connections."""
        rows = await self.conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])",
            _client_ports(pids, self.server_port))
        return [int(r["pid"]) for r in rows]

    async def sample(self, pids: Sequence[int], into: DbActivity, seen: set[int],
                     stop: asyncio.Event) -> None:
        while not stop.is_set():
            ports = _client_ports(pids, self.server_port)
            rows = await self.conn.fetch(
                "SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity "
                "WHERE client_port = ANY($1::int[])", ports)
            into.samples += 1
            for row in rows:
                seen.add(int(row["pid"]))
                state, wait = row["state"] or "", row["wait_event_type"]
                into.connections += 1
                if state == "active":
                    if wait is not None:
                        into.waits[f"{wait}:{row['wait_event']}"] += 1
                    if wait is None:
                        into.running += 1
                    elif wait == "IO":
                        into.io += 1
                    elif wait == "Lock":
                        into.lock += 1
                    elif wait == "LWLock":
                        into.lwlock += 1
                    elif wait == "Client":
                        into.idle_in_transaction += 1
                    else:
                        into.other_wait += 1
                elif state.startswith("idle in transaction"):
                    into.idle_in_transaction += 1
                else:
                    into.idle += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)

    async def check(self, schema: str, result: ReplicasResult) -> None:
        """Count the entries of every thread of the phases that ran to the end (four a
        message), and the runs' states."""
        expected = {_tag(p) + "-": 4 * p.messages for p in result.phases if not p.timed_out}
        try:
            counts = await self.conn.fetch(
                f'SELECT thread_id, count(*) AS n FROM "{schema}".entries '
                "WHERE thread_id LIKE 'bench-%' GROUP BY thread_id")
            result.checked_threads = sum(p.threads for p in result.phases if not p.timed_out)
            mine = 0
            result.wrong_threads = 0
            for r in counts:
                tag = r["thread_id"].rsplit("-", 1)[0] + "-"
                if tag in expected:
                    mine += 1
                    result.wrong_threads += r["n"] != expected[tag]
            result.wrong_threads += result.checked_threads - mine
            states = await self.conn.fetch(
                f'SELECT state, count(*) AS n FROM "{schema}".runs GROUP BY state')
            result.run_states = {r["state"]: int(r["n"]) for r in states}
        except Exception as exc:
            result.log_problems.append((1, f"bench: the check failed: {exc}"))


# -- the clients ---------------------------------------------------------------------------


async def _user(client: httpx.AsyncClient, urls: Sequence[str], thread: str, t: int,
                messages: int, phase: Phase) -> None:
    for i in range(messages):
        url = urls[(t + i) % len(urls)]
        try:
            response = await client.post(f"{url}/v1/threads/{thread}/messages",
                                         json={"text": user_text(i)})
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            phase.failed.append(f"{thread} message {i}: {type(exc).__name__}: {exc}")
            continue
        if response.status_code == 200 and body.get("state") == "completed":
            phase.done += 1
        else:
            phase.failed.append(f"{thread} message {i}: HTTP {response.status_code} "
                                f"{body.get('state')} {body.get('reason')} {body.get('error')}")


async def _model_calls(client: httpx.AsyncClient, model_url: str) -> tuple[int, int]:
    """(requests, connections) the model server has seen."""
    stats = (await client.get(f"{model_url}/stats")).json()
    return int(stats["requests"]), int(stats["connections"])


def _tag(phase: Phase) -> str:
    return f"bench-{phase.mode[0]}{phase.replicas}"


def _phase_timeout(phase: Phase) -> float:
    """Three times the ideal, and half a minute."""
    return 3 * phase.threads * phase.messages / phase.ideal_per_second + 30


def _client(token: str, threads: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(60.0), trust_env=False,
                             headers={"Authorization": f"Bearer {token}"},
                             limits=httpx.Limits(max_connections=4 * threads))


async def _phase(client: httpx.AsyncClient, replicas: Sequence[_Replica], phase: Phase, *,
                 model: _Process, model_url: str, postmaster: int | None,
                 db: _Db | None, timeout_s: float, cut_by_budget: bool, token: str) -> None:
    urls = [r.url for r in replicas]
    pids = [r.process.proc.pid for r in replicas]
    tag = _tag(phase)
    calls_before = await _model_calls(client, model_url)
    counters_before = await db.counters() if db is not None else None
    stop = asyncio.Event()
    activity = DbActivity()
    seen: set[int] = set()
    backends_before: dict[int, float] = {}
    if db is not None and postmaster is not None:
        backends_before = {b: _proc_seconds(b) for b in await db.backends(pids)}
    sampler = asyncio.create_task(db.sample(pids, activity, seen, stop)) \
        if db is not None else None
    # The users' own client: no connection left idle from an earlier phase (a server's
    # keep-alive timeout closing it as it is reused makes a ReadError of a message).
    users = _client(token, phase.threads)
    before = _cpu(pids, postmaster, model.proc.pid)
    try:
        async with users, asyncio.timeout(timeout_s):
            await asyncio.gather(*(_user(users, urls, f"{tag}-{t}", t, phase.messages, phase)
                                   for t in range(phase.threads)))
    except TimeoutError:
        phase.timed_out = True
        phase.cut_by_budget = cut_by_budget
    after = _cpu(pids, postmaster, model.proc.pid)
    backends_after = {b: _proc_seconds(b) for b in seen | set(backends_before)
                      if _stat_fields(b) is not None}
    phase.elapsed_s = after.at - before.at
    stop.set()
    if sampler is not None:
        try:
            await sampler
        except Exception as exc:  # the figures stand without it
            phase.failed.append(f"bench: the pg_stat_activity sampler failed: {exc}")
        else:
            n = max(1, activity.samples)
            for name in ("connections", "running", "io", "lock", "lwlock", "other_wait",
                         "idle_in_transaction", "idle"):
                setattr(activity, name, getattr(activity, name) / n)
            phase.db = activity
    span = phase.elapsed_s
    phase.machine_cores = (after.machine[0] - before.machine[0]) / span
    phase.steal_cores = (after.machine[1] - before.machine[1]) / span
    phase.replica_cores = [(a - b) / span for a, b in zip(after.replicas, before.replicas,
                                                          strict=True)]
    if after.postgres is not None and before.postgres is not None:
        phase.postgres_cores = (after.postgres - before.postgres) / span
    phase.model_cores = (after.model - before.model) / span
    phase.client_cores = (after.client - before.client) / span
    phase.backends = len(seen | set(backends_before))
    if postmaster is not None and db is not None:
        phase.backend_cores = sum(max(0.0, t - backends_before.get(b, 0.0))
                                  for b, t in backends_after.items()) / span
    calls_after = await _model_calls(client, model_url)
    phase.model_calls = calls_after[0] - calls_before[0]
    phase.model_connections = calls_after[1] - calls_before[1]
    counters_after = await db.counters() if db is not None else None
    if counters_before is not None and counters_after is not None:
        phase.commits_per_s = (counters_after[0] - counters_before[0]) / span
        phase.wal_syncs_per_s = (counters_after[1] - counters_before[1]) / span


# -- the logs ------------------------------------------------------------------------------

_IDS = re.compile(r"\b[0-9a-f]{12,}\b")
_THREADS = re.compile(r"bench-[a-z0-9-]+")
_PIDS = re.compile(r"\b(process|pid) \d+")


def _log_problems(logs: Sequence[Path]) -> list[tuple[int, str]]:
    found: Counter[str] = Counter()
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                found[f"(not JSON) {line[:160]}"] += 1
                continue
            if not isinstance(record, dict):
                continue
            level = str(record.get("level", ""))
            if level in ("warning", "error", "critical"):
                text = _PIDS.sub(r"\1 N", _THREADS.sub("bench-…", _IDS.sub(
                    "…", str(record.get("message", "")))))
                found[f"{level} {record.get('logger')}: {text[:200]}"] += 1
    return [(n, what) for what, n in found.most_common()]


# -- the workload --------------------------------------------------------------------------


async def run_replicas(
    workdir: Path,
    *,
    threads: int,
    messages: int,
    latency_s: float,
    counts: Sequence[int] = (1, 2, 3),
    modes: Sequence[Mode] = ("global", "thread"),
    budget_s: float = 150.0,
    thread_messages: int | None = None,
) -> ReplicasResult:
    """Workload 9: ``threads`` users x ``messages`` through 1, 2, 3 replicas, per mode
    (``thread_messages`` for ``"thread"``, default half of ``messages``, at least 2: a
    variant, kept short).

    Bounded by ``budget_s`` from the first replica's start: a phase gets at most what is
    left (cut short, it says TIMED OUT) and the phases after the budget are not run."""
    import asyncpg  # type: ignore[import-untyped]

    result = ReplicasResult(where=redact_dsn(PG_DSN), threads=threads, messages=messages,
                            latency_s=latency_s, cores=os.cpu_count() or 1,
                            budget_s=budget_s)
    try:
        conn = await asyncpg.connect(PG_DSN, timeout=2)
    except Exception as exc:
        result.skipped = f"no PostgreSQL at {result.where} ({type(exc).__name__})"
        return result
    schema = f"maiden_bench_{uuid4().hex[:12]}"
    token = "bench-" + uuid4().hex
    env = _env(token)
    home = workdir / f"replicas-{schema}"
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    server = urlsplit(PG_DSN)
    local = server.hostname in (None, "", "127.0.0.1", "localhost", "::1")
    postmaster = _postmaster() if local else None
    db = _Db(conn, server.port or 5432)
    model: _Process | None = None
    replicas: list[_Replica] = []
    logs: list[Path] = []
    try:
        model = _spawn([sys.executable, "-m", "bench.latency_model", "--latency",
                        str(latency_s)], home, env, "model")
        port = int((await _wait_for_line(model, "port ", 30))[-1].split()[1])
        model_url = f"http://127.0.0.1:{port}"
        async with _client(token, threads) as client:
            deadline = time.monotonic() + budget_s
            for mode in modes:
                for n in counts:
                    left = deadline - time.monotonic()
                    if left < 10:
                        result.not_measured.append(f"{mode} x {n}")
                        continue
                    while len(replicas) < n:
                        k = len(replicas)
                        replica, took = await _start_replica(
                            home / f"{mode}-{k}", env, schema=schema, mode=mode,
                            base_url=f"{model_url}/v1")
                        replicas.append(replica)
                        logs.append(replica.process.err)
                        result.startup_s.append(took)
                        warm = Phase(mode, 1, 1, 1, latency_s)
                        await _user(client, [replica.url], f"warm-{mode}-{k}", 0, 1, warm)
                        if warm.failed:
                            raise RuntimeError(f"replica {k} ({mode}) failed its warm-up: "
                                               f"{warm.failed[0]}")
                    left = deadline - time.monotonic()
                    if left < 5:
                        result.not_measured.append(f"{mode} x {n}")
                        continue
                    per_thread = messages if mode == "global" else \
                        thread_messages or max(2, messages // 2)
                    phase = Phase(mode, n, threads, per_thread, latency_s)
                    own = _phase_timeout(phase)
                    await _phase(client, replicas[:n], phase, model=model,
                                 model_url=model_url, postmaster=postmaster, db=db,
                                 timeout_s=min(own, left), cut_by_budget=left < own,
                                 token=token)
                    result.phases.append(phase)
                for replica in replicas:
                    result.exit_codes.append(await _stop(replica.process))
                replicas = []
            result.model_requests, result.model_connections = await _model_calls(client,
                                                                                 model_url)
        await db.check(schema, result)
    finally:
        for replica in replicas:
            _kill(replica.process)
        if model is not None:
            _kill(model)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
    result.log_problems += _log_problems(logs)
    return result
