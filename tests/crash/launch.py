"""Driver processes (``tests/crash/driver.py``), forked with their imports already done.

``python -m tests.crash.driver`` spends about 0.45 s of CPU importing before its first step,
twice what the rest of a drill's process costs, and the crash tests start several hundred
of them. So each driver is forked by a server that imported the driver once (the standard
library's ``forkserver``, one per pytest process): still a process of its own, with its own
memory and pid, that its kill point ends with a real SIGKILL, leaving only what it wrote to
disk, and that begins in the state a fresh ``python -m tests.crash.driver`` reaches once
imported (nothing of the test's process, nor of an earlier driver, is in it). Measured on
2 cores: about 0.2 s of CPU a driver process instead of 0.65 s.

``run`` waits for one, as ``subprocess.run`` would; ``start`` begins one that an async test
awaits (``Driver.finished``) while it serves the fakes the driver talks to.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from multiprocessing import connection
from pathlib import Path

from tests.crash import driver

__all__ = ["PRELOAD", "Driver", "run", "start"]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60

PRELOAD = (
    __name__,  # and with it the driver
    # What the driver imports only when it gets there: each model call (the OpenAI wire's
    # messages), --slack, --discord, --command and --fire, --send-message.
    "runtime.providers.openai",
    "slack_sdk.web.async_client", "channels.slack.deliverer", "channels.slack.streamer",
    "tests.fakes.slack.payloads",
    "discord.http", "channels.discord.channel", "channels.discord.deliverer",
    "channels.discord.streamer",
    "channels.commands", "schedules",
    "runtime.builtins.send_message",
)
"""Imported once by the server that forks the drivers (a module missing here is imported by
each driver that needs it, as a fresh process would)."""

_FORKS = multiprocessing.get_context("forkserver")
_FORKS.set_forkserver_preload(list(PRELOAD))
_HELD = threading.Lock()
"""Held to start a process or read its end: the end is read once from the process's
sentinel, and every start polls each process not yet seen to end, so two threads at it
(the matrix's pool) could both read one end, the later one reading nothing."""


def _main(argv: list[str], out: str, err: str,
          entry: Callable[[Sequence[str]], None] = driver.cli) -> None:
    """In the forked process: what ``python -m tests.crash.driver ARGV`` does once imported
    (in ROOT, its output to the files ``out`` and ``err``; ``entry``: another drill's
    ``cli``, of a module beside the driver). An exception ends it with status 1 and its
    traceback on ``err``, a SystemExit with its code, a kill point with SIGKILL."""
    os.chdir(ROOT)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [driver.__file__, *argv]
    try:
        entry(argv)
    finally:
        atexit._run_exitfuncs()  # as the interpreter would at exit (multiprocessing does not)


class Driver:
    """One driver process, begun by ``start``."""

    def __init__(self, argv: Sequence[str],
                 entry: Callable[[Sequence[str]], None] = driver.cli) -> None:
        self.argv = list(argv)
        self._outputs = tempfile.mkdtemp(prefix="maiden-driver-")
        self._out = os.path.join(self._outputs, "stdout")
        self._err = os.path.join(self._outputs, "stderr")
        self._process = _FORKS.Process(target=_main,
                                       args=(self.argv, self._out, self._err, entry),
                                       name="tests.crash.driver")
        with _HELD:
            self._process.start()
        self.pid: int = self._process.pid  # type: ignore[assignment]
        self.returncode: int | None = None

    def wait(self, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Its end: exit status (``-9`` when SIGKILLed), stdout and stderr. Killed, and
        ``subprocess.TimeoutExpired``, if it has not ended within ``timeout`` seconds."""
        ended = False
        try:
            ended = bool(connection.wait([self._process.sentinel], timeout))
        finally:  # timed out, or the test interrupted: it must not outlive the test
            with _HELD:
                if not ended:
                    self._process.kill()
                self._process.join()
                self.returncode = self._process.exitcode
                self._process.close()
            out, err = self._read(self._out), self._read(self._err)
            shutil.rmtree(self._outputs, ignore_errors=True)
        if not ended:
            raise subprocess.TimeoutExpired(self.argv, timeout, out, err)
        assert self.returncode is not None
        return subprocess.CompletedProcess(self.argv, self.returncode, out, err)

    async def finished(self, within_s: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``wait(within_s)``, without holding up the event loop (where the test serves the
        fakes the driver talks to)."""
        return await asyncio.to_thread(self.wait, within_s)

    def kill(self) -> None:
        """SIGKILL it, unless it has ended."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    @staticmethod
    def _read(path: str) -> str:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:  # killed before it got this far
            return ""


def start(*argv: str) -> Driver:
    """Begin ``python -m tests.crash.driver ARGV`` (forked, see above)."""
    return Driver(argv)


def run(*argv: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``python -m tests.crash.driver ARGV`` to its end (forked, see above)."""
    return Driver(argv).wait(timeout)
