"""`maiden chat` through a real subprocess, with stdin piped: a call that waits for a person is
decided by `maiden approve` in another process, and chat shows how the run ends."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.processes.test_cli import _with_tools, maiden
from tests.processes.test_cli_faults import ENV


class Chat:
    """A `maiden chat` process: lines typed on its stdin, its output read line by line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def until(self, text: str) -> str:
        """Read on until a line holds ``text``; that line."""
        while True:
            try:
                line = self._lines.get(timeout=30)
            except queue.Empty:
                raise AssertionError(f"no {text!r} from chat:\n{''.join(self.seen)}") from None
            assert line is not None, f"chat ended before {text!r}:\n{''.join(self.seen)}"
            self.seen.append(line)
            if text in line:
                return line

    def rest(self) -> str:
        while (line := self._lines.get(timeout=30)) is not None:
            self.seen.append(line)
        return "".join(self.seen)


@contextmanager
def chat(home: Path, thread: str) -> Iterator[Chat]:
    proc = subprocess.Popen([sys.executable, "-m", "bot", "chat", "--thread", thread],
                            cwd=home, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield Chat(proc)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()


def test_chat_shows_the_end_of_a_run_approved_from_another_terminal(home: Path) -> None:
    _with_tools(home)
    with chat(home, "ops") as session:
        session.type('/tool restart {"service": "db"}')
        prompt = session.until("[approval needed] restart")
        command = prompt.split("`maiden approve ", 1)[1].split("`", 1)[0].split()
        approved = maiden(home, "approve", *command, "--by", "lead")
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith('restart returned "restarted db"')
        session.until('[tool] restart ok: "restarted db"')  # the run as it goes on
        session.until('bot> restart returned "restarted db"')
        session.type("/quit")
        session.rest()
    assert (home / "restarts.log").read_text() == "db\n"


def test_chat_shows_a_denial_from_another_terminal_and_goes_on(home: Path) -> None:
    _with_tools(home)
    with chat(home, "ops") as session:
        session.type('/tool restart {"service": "db"}')
        prompt = session.until("[approval needed] restart")
        command = prompt.split("`maiden approve ", 1)[1].split("`", 1)[0].split()
        denied = maiden(home, "approve", *command, "--deny", "--reason", "not now")
        assert denied.returncode == 0, denied.stderr
        session.until('bot> restart returned {"error": {"type": "denied"')
        session.type("still there?")
        session.until("bot> echo: still there?")
        session.type("/quit")
        session.rest()
    assert not (home / "restarts.log").exists()


def test_ctrl_c_while_chat_waits_for_a_decision_cancels_the_run(home: Path) -> None:
    _with_tools(home)
    with chat(home, "ops") as session:
        session.type('/tool restart {"service": "db"}')
        session.until("[waiting for that; Ctrl-C cancels the run]")
        session.proc.send_signal(signal.SIGINT)
        session.until("[cancelled: cancelled by terminal]")
        session.type("/quit")
        session.rest()
    assert "cancelled" in maiden(home, "runs", "--thread", "ops").stdout
    assert not (home / "restarts.log").exists()


def test_chat_follows_a_message_queued_behind_a_run_that_waits(home: Path) -> None:
    _with_tools(home)
    paused = maiden(home, "send", "ops", '/tool restart {"service": "db"}')
    assert paused.returncode == 3, paused.stderr
    command = paused.stderr.split("maiden approve ", 1)[1].split()[:2]
    with chat(home, "ops") as session:
        session.type("and then?")
        session.until("[queued: waiting behind run")
        session.until("[waiting for that; Ctrl-C cancels the run]")
        approved = maiden(home, "approve", *command)
        assert approved.returncode == 0, approved.stderr
        session.until("bot> echo: and then?")
        session.type("/quit")
        session.rest()
