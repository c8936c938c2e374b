"""The system under test: ``maiden run`` replicas (each its home, agent.toml and HTTP
port), the fake model, and the history of everything done to them.

Every replica runs ``python -m bot --log-format json run`` in its own directory beside
the same tools module (``chaos/effects.py``, which writes the one ledger), on one store:
a PostgreSQL schema reached through the soak's proxy, or one SQLite file.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.site import free_port

__all__ = ["APPROVAL_TIMEOUT_S", "LEASE_LINGER_S", "LEASE_TTL_S", "OUTSIDER", "PEOPLE_RIGHTS",
           "History", "Replica", "StoreSpec", "die_with_parent", "token_of", "write_home"]

ROOT = Path(__file__).resolve().parents[1]
EFFECTS = Path(__file__).with_name("effects.py")
PEOPLE_RIGHTS = '["talk", "approve", "operate"]'
APPROVAL_TIMEOUT_S = 8
LEASE_TTL_S = 5
LEASE_LINGER_S = 1.0  # maiden's default
# A token with ``talk`` only, whose owner sends nothing: another person's files are not hers
# to download (chaos/files_checks.py).
OUTSIDER = "eve"


def token_of(person: str) -> str:
    return f"chaos-{person}-" + "7" * 32


@dataclass
class History:
    """What was done to the system and when (seconds since the soak began)."""

    started: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str, str]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.started

    def note(self, kind: str, text: str) -> None:
        self.events.append((round(self.now(), 2), kind, text))

    def begin(self) -> None:
        """Time 0 is now; what happened before (replicas starting) is at negative times."""
        shift = time.monotonic() - self.started
        self.started += shift
        self.events = [(round(t - shift, 2), kind, text) for t, kind, text in self.events]

    def around(self, at: float | None, span: float = 15.0) -> list[str]:
        chosen = [e for e in self.events if at is None or abs(e[0] - at) <= span]
        return [f"  {t:8.2f}s  {kind:<14} {text}" for t, kind, text in chosen[-40:]]


@dataclass
class StoreSpec:
    kind: str  # "postgres" or "sqlite"
    schema: str = ""
    dsn: str = ""  # through the proxy
    path: str = ""


def write_home(home: Path, store: StoreSpec, model_url: str, port: int,
               people: list[str], concurrency: str, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EFFECTS, home / "chaos_effects.py")
    if store.kind == "postgres":
        where = (f'kind = "postgres"\ndsn_env = "CHAOS_PG_DSN"\nschema = "{store.schema}"\n'
                 "pool_size = 4\n")
    else:
        where = f'kind = "sqlite"\npath = "{store.path}"\n'
    tokens = "".join(f'\n[[http.tokens]]\nname = "{p}"\ntoken_env = "CHAOS_TOKEN_{p.upper()}"\n'
                     f"rights = {PEOPLE_RIGHTS}\n" for p in people)
    tokens += (f'\n[[http.tokens]]\nname = "{OUTSIDER}"\ntoken_env = "CHAOS_TOKEN_'
               f'{OUTSIDER.upper()}"\nrights = ["talk"]\n')
    (home / "agent.toml").write_text(f'''
[agent]
name = "chaos"
max_turns = 8
approval_timeout_s = {APPROVAL_TIMEOUT_S}

[provider]
kind = "openai"
model = "chaos-model"
base_url = "{model_url}"
api_key_env = "CHAOS_MODEL_KEY"
max_retries = 4
timeout_s = 20

[store]
{where}
[runtime]
concurrency = "{concurrency}"
poll_interval_s = 0.2
lease_ttl_s = {LEASE_TTL_S}
shutdown_grace_s = 3

[http]
host = "127.0.0.1"
port = {port}
{tokens}
[tools]
modules = ["chaos_effects"]
builtins = []
{extra}''')


def die_with_parent() -> None:
    """In the child: SIGKILL it if the soak dies without cleaning up (Linux's prctl)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Replica:
    """One ``maiden run``; ``up`` once its banner said Ready, until it is stopped or dies."""

    def __init__(self, index: int, home: Path, env: dict[str, str], log: Path,
                 configure: Callable[[int], None]) -> None:
        self.index = index
        self.name = f"r{index}"
        self.home = home
        self.env = env
        self.log = log
        self._configure = configure  # writes its agent.toml for an HTTP port
        self.port = 0
        self.move()
        self.proc: asyncio.subprocess.Process | None = None
        self.up = False
        self.stopping = False  # a SIGTERM or SIGKILL of ours is on its way
        self.starts = 0
        self._drain: asyncio.Task[None] | None = None

    def move(self) -> None:
        """Serve on another free port from its next start (its port was taken meanwhile:
        a free port is only free until something else binds it)."""
        self.port = free_port()
        self._configure(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout_s: float = 60.0) -> None:
        """Start it and wait for its Ready line; raise if it exits first."""
        self.stopping = False
        self.starts += 1
        with self.log.open("a") as stderr:
            self.proc = await asyncio.create_subprocess_exec(
                # maiden's command line, with its clock as the soak sets it (chaos/launch.py)
                sys.executable, "-m", "chaos.launch", "--log-format", "json", "run", cwd=self.home,
                env=self.env, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                start_new_session=True,  # a Ctrl-C of the soak is not theirs: it stops them
                preexec_fn=die_with_parent)
        assert self.proc.stdout is not None
        banner: list[str] = []
        async with asyncio.timeout(timeout_s):
            while not (banner and banner[-1].startswith("Ready.")):
                line = await self.proc.stdout.readline()
                if not line:
                    code = await self.proc.wait()
                    raise RuntimeError(f"{self.name} exited ({code}) before Ready: "
                                       + self.last_words())
                banner.append(line.decode())
        self.up = True
        self._drain = asyncio.create_task(self._read_rest(self.proc))

    async def _read_rest(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while await proc.stdout.readline():
            pass

    def last_words(self) -> str:
        """What it printed last that is not a JSON log line (why it would not start)."""
        if not self.log.exists():
            return ""
        plain = [line for line in self.log.read_text(errors="replace").splitlines()
                 if line and not line.startswith("{")]
        return " / ".join(plain[-2:])[:400]

    async def kill(self) -> int:
        """SIGKILL, reaped."""
        return await self._signal(signal.SIGKILL, 30.0)

    async def term(self, timeout_s: float = 30.0) -> int:
        """SIGTERM; its exit code (SIGKILL after ``timeout_s``: then ``None`` is an error)."""
        return await self._signal(signal.SIGTERM, timeout_s)

    async def _signal(self, signum: int, timeout_s: float) -> int:
        assert self.proc is not None
        self.up = False
        self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signum)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
            raise
        finally:
            await self._stop_drain()
        return code

    async def _stop_drain(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)
            self._drain = None

    async def close(self) -> None:
        """Whatever state it is in: no process left."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        self.up = False
        await self._stop_drain()


async def settled(tasks: set[asyncio.Task[None]], timeout_s: float, *, cancel: bool = True
                  ) -> bool:
    """Wait (``timeout_s`` at most) until ``tasks`` (which remove themselves when done) are
    over; whether they all were. With ``cancel``, what is left is cancelled and awaited."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
    done = not tasks
    if cancel:
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return done
