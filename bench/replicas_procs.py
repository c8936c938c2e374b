"""Workload 9's processes: each replica a real ``python -m bot --log-format json run`` in a
folder of its own (its ``agent.toml`` and the workload's ``lookup`` tool module), the model
server (``bench.latency_model``), started, waited for and stopped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .postgres import PG_DSN
from .replicas_figures import Mode
from .workload import RESULT

__all__ = ["Process", "Replica", "kill", "replica_env", "spawn", "start_model",
           "start_replica", "stop", "wait_for_line"]

ROOT = Path(__file__).resolve().parent.parent

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


@dataclass
class Process:
    argv: list[str]
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    files: list[IO[bytes]]

    def close_files(self) -> None:
        for f in self.files:
            f.close()


def spawn(argv: Sequence[str], cwd: Path, env: dict[str, str], name: str) -> Process:
    out, err = cwd / f"{name}.out", cwd / f"{name}.log"
    files: list[IO[bytes]] = [out.open("wb"), err.open("wb")]
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=files[0], stderr=files[1])
    return Process(list(argv), proc, out, err, files)


async def wait_for_line(p: Process, prefix: str, timeout_s: float) -> list[str]:
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


async def stop(p: Process) -> int | None:
    """SIGTERM, up to ``STOP_S``, then SIGKILL; the exit status (None when killed)."""
    code: int | None = p.proc.poll()
    if code is None:
        p.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = await asyncio.to_thread(p.proc.wait, STOP_S)
    kill(p)
    return code


def kill(p: Process) -> None:
    if p.proc.poll() is None:
        p.proc.kill()
        p.proc.wait(timeout=10)
    p.close_files()


def replica_env(token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and k != "MAIDEN_BENCH_NO_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MAIDEN_BENCH_REPLICA_DSN"] = PG_DSN
    env["MAIDEN_BENCH_HTTP_TOKEN"] = token
    return env


@dataclass
class Replica:
    process: Process
    url: str


def _write_home(home: Path, *, schema: str, mode: Mode, base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "bench_tools.py").write_text(TOOLS)
    (home / "agent.toml").write_text(AGENT_TOML.format(base_url=base_url, schema=schema,
                                                       mode=mode))


async def start_replica(home: Path, env: dict[str, str], *, schema: str, mode: Mode,
                         base_url: str) -> tuple[Replica, float]:
    _write_home(home, schema=schema, mode=mode, base_url=base_url)
    started = time.perf_counter()
    p = spawn([sys.executable, "-m", "bot", "--log-format", "json", "run"], home, env,
              "replica")
    try:
        lines = await wait_for_line(p, "Ready.", READY_S)
    except BaseException:
        kill(p)
        raise
    http = next(line for line in lines if line.startswith("  http "))
    return Replica(p, http.split()[1]), time.perf_counter() - started


async def start_model(home: Path, env: dict[str, str], latency_s: float
                      ) -> tuple[Process, str]:
    """The model server (``bench.latency_model``) and its URL."""
    model = spawn([sys.executable, "-m", "bench.latency_model", "--latency", str(latency_s)],
                  home, env, f"model-{latency_s:g}s")
    try:
        port = int((await wait_for_line(model, "port ", 30))[-1].split()[1])
    except BaseException:
        kill(model)
        raise
    return model, f"http://127.0.0.1:{port}"
