"""Faults a new user hits, through a real `maiden` process: each is one line, the right exit
code, and nothing lost. Ctrl-C in `maiden chat` goes through a pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.http_helpers import banner_url
from tests.processes.test_cli import ROOT, _serve, _stop, _with_tools, maiden

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The error, which must be short and carry no traceback."""
    assert "Traceback" not in result.stderr and "Event loop is closed" not in result.stderr, \
        result.stderr
    return result.stderr


# -- the store ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["threads"], ["send", "t", "hi"], ["run"]])
def test_a_store_folder_that_cannot_be_made(home: Path, command: list[str]) -> None:
    (home / "data").write_text("a file where the store's folder should be")
    result = maiden(home, *command)
    assert result.returncode == 2
    error = one_line(result)
    assert "store.path" in error and f"{home / 'data'} is a file" in error


@pytest.mark.parametrize("path", ["/", "."])
def test_a_folder_as_the_database(home: Path, path: str) -> None:
    text = (home / "agent.toml").read_text().replace('path = "data/maiden.db"', f'path = "{path}"')
    (home / "agent.toml").write_text(text)
    result = maiden(home, "send", "t", "hi")
    assert result.returncode == 2
    assert "store.path" in one_line(result)


def test_an_empty_store_path_is_a_config_error(home: Path) -> None:
    text = (home / "agent.toml").read_text().replace('path = "data/maiden.db"', 'path = ""')
    (home / "agent.toml").write_text(text)
    result = maiden(home, "send", "t", "hi")
    assert result.returncode == 2 and "store.path" in one_line(result)


def _read_only(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``maiden COMMAND`` with ``folder`` mounted read-only (a private mount namespace, so
    root is refused too)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed: cannot mount a folder read-only")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    script = (f'mount --bind -o ro "{folder}" "{folder}" && exec "{sys.executable}" -m bot '
              + " ".join(f"'{part}'" for part in command))
    return subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=folder.parent,
                          capture_output=True, text=True, timeout=60, env=ENV, check=False)


@pytest.mark.parametrize("command", [["run"], ["send", "t", "hi"]])
def test_a_read_only_store_is_refused_at_once(home: Path, command: list[str]) -> None:
    assert maiden(home, "send", "t", "first").returncode == 0
    result = _read_only(home / "data", *command)
    assert result.returncode == 2, result.stdout
    assert "store.path" in one_line(result)
    assert "Ready" not in result.stdout


def test_a_corrupt_entry_fails_the_run_and_show_still_shows(home: Path) -> None:
    assert maiden(home, "send", "t", "one").returncode == 0
    with sqlite3.connect(home / "data" / "maiden.db") as db:
        db.execute("UPDATE entries SET data = '{not json' WHERE thread_id = 't' AND seq = 1")
    sent = maiden(home, "send", "t", "two")
    assert sent.returncode == 1
    error = one_line(sent)
    assert error.count("\n") == 1, error
    assert "failed: corrupt_store" in error and "'t'" in error and "row 1" in error
    shown = maiden(home, "show", "t")
    assert "2 entries, 2 runs" in shown.stdout
    assert "(entries from 1 on are unreadable)" in shown.stdout  # a page at a time
    assert "row 1" in shown.stderr
    assert "failed" in shown.stdout and "corrupt_store" in shown.stdout


# -- messages and ids ---------------------------------------------------------------------


def test_one_message_rule_for_every_entry_point(home: Path) -> None:
    text = (home / "agent.toml").read_text().replace(
        "repeat_limit = 3", "repeat_limit = 3\nmax_message_chars = 20")
    (home / "agent.toml").write_text(text)
    empty = maiden(home, "send", "t", "   ")
    assert empty.returncode == 2 and "the message is empty" in one_line(empty)
    long = maiden(home, "send", "t", "x" * 21)
    assert long.returncode == 2 and "at most 20 are accepted" in one_line(long)
    no_id = maiden(home, "send", "", "hi")
    assert no_id.returncode == 2 and "thread id cannot be empty" in one_line(no_id)
    assert maiden(home, "threads").stdout == "no threads yet\n"


# -- exit codes and messages ----------------------------------------------------------------


def test_usage_errors_exit_2(home: Path) -> None:
    for limit in ("-1", "0", "many"):
        result = maiden(home, "runs", "--limit", limit)
        assert result.returncode == 2, (limit, result.stderr)
    since = maiden(home, "usage", "--since", "yesterday")
    assert since.returncode == 2 and "ISO date" in one_line(since)


def test_a_tools_module_that_exits_or_fails(home: Path) -> None:
    (home / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (home / "broken.py").write_text("raise RuntimeError('oops')\n")
    for module, why in (("exits", "it called sys.exit(3)"), ("broken", "RuntimeError: oops")):
        text = (ROOT / "agent.toml").read_text().replace("modules = []",
                                                         f'modules = ["{module}"]')
        (home / "agent.toml").write_text(text)
        result = maiden(home, "check")
        assert result.returncode == 2
        assert f"tools.modules: cannot import '{module}': {why}" in one_line(result)


def test_config_errors_name_the_file_given(home: Path) -> None:
    (home / "other.toml").write_text("[tools]\nbuiltins = ['clock']\nmodules = ['nope']\n")
    result = maiden(home, "--config", "other.toml", "send", "t", "hi")
    assert result.returncode == 2
    assert "other.toml: tools.modules: cannot import 'nope'" in one_line(result)
    assert "agent.toml" not in result.stderr


def test_verbose_send_logs_the_run(home: Path) -> None:
    result = maiden(home, "-v", "send", "t", '/tool clock {"tz": "UTC"}')
    assert result.returncode == 0
    assert "run started" in result.stderr and "tool clock called" in result.stderr


def test_the_approval_prompt_shows_json(home: Path) -> None:
    _with_tools(home)
    result = maiden(home, "send", "ops", '/tool restart {"service": "db"}')
    assert result.returncode == 3
    assert 'restart {"service": "db"}' in result.stderr


# -- Ctrl-C -------------------------------------------------------------------------------


def test_ctrl_c_on_send_cancels_the_run_and_says_so(home: Path) -> None:
    _with_tools(home)
    proc = subprocess.Popen([sys.executable, "-m", "bot", "send", "t", "/tool slow"], cwd=home,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = interrupt_when(proc, home / "slow.started")
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert "cancelling run" in err and "cancelled: cancelled by terminal" in err
    runs = maiden(home, "runs").stdout
    assert "cancelled" in runs
    # The next message on the thread does not run the cut-off tool again.
    (home / "slow.started").unlink()
    again = maiden(home, "send", "t", "hello")
    assert again.returncode == 0 and not (home / "slow.started").exists()


def test_a_second_ctrl_c_on_send_leaves_at_once(home: Path) -> None:
    _with_tools(home)
    (home / "ops_tools.py").write_text((home / "ops_tools.py").read_text() + '''

@tool(timeout_s=300)
def stubborn() -> str:
    """A sync tool: cancelling cannot stop its thread."""
    import time
    Path("slow.started").write_text("yes")
    time.sleep(20)
    return "done"
''')
    proc = subprocess.Popen([sys.executable, "-m", "bot", "send", "t", "/tool stubborn"],
                            cwd=home, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for(home / "slow.started")
        proc.send_signal(signal.SIGINT)
        _wait_for_text(proc, "cancelling run")
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # The second Ctrl-C comes while the run is being cancelled ("left run ...") or, when the
    # cancellation was quick, while the process waits for the tool's thread at exit
    # ("interrupted"): either way it leaves at once, without a traceback.
    assert proc.returncode == 130 and "Traceback" not in err
    assert "left run" in err or "maiden: interrupted (Ctrl-C)" in err, err
    assert took < 15  # not after the 20 s tool (a bound, not a timing assertion)


def _wait_for(path: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def interrupt_when(proc: subprocess.Popen[str], marker: Path) -> tuple[str, str]:
    """Once ``marker`` exists, Ctrl-C (SIGINT) to ``proc``; its stdout and stderr (killed if
    it has not ended within 30 s)."""
    try:
        _wait_for(marker)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _wait_for_text(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stderr is not None
    seen = ""
    while text not in seen:
        line = proc.stderr.readline()
        assert line, f"stderr ended before {text!r}: {seen}"
        seen += line


@pytest.fixture
def terminal(home: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`maiden chat` on a pseudo-terminal; yields the process and the terminal's fd."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "bot", "chat", "--thread", "c"], cwd=home,
                            env=ENV, stdin=child, stdout=child, stderr=child,
                            preexec_fn=_controlling_terminal)
    os.close(child)
    try:
        yield proc, main
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


def _controlling_terminal() -> None:
    """In the child: a session of its own whose controlling terminal is the pty, so that
    Ctrl-C typed there sends it SIGINT, as in a real terminal."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class _Screen:
    """What the terminal printed, read up to each awaited text; what came after it (the next
    prompt, printed in the same write) is kept for the next wait."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.unread = b""

    def read_until(self, text: bytes, timeout_s: float = 30) -> bytes:
        deadline = time.monotonic() + timeout_s
        while text not in self.unread:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}: {self.unread!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the other side closed
                    break
                if not chunk:
                    break
                self.unread += chunk
        seen, _, self.unread = self.unread.partition(text)
        return seen + text


def test_ctrl_c_at_the_chat_prompt_leaves_at_once(
    terminal: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, fd = terminal
    screen = _Screen(fd)
    screen.read_until(b"you> ")
    os.write(fd, b"hello\r")
    screen.read_until(b"echo: hello")
    screen.read_until(b"you> ")
    os.write(fd, b"half a line")
    os.write(fd, b"\x03")  # Ctrl-C: the terminal sends SIGINT
    assert proc.wait(timeout=10) == 130


def test_ctrl_d_at_the_prompt_leaves_cleanly(
    terminal: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, fd = terminal
    screen = _Screen(fd)
    screen.read_until(b"you> ")
    os.write(fd, b"first\r")
    screen.read_until(b"echo: first")
    screen.read_until(b"you> ")
    os.write(fd, b"\x04")
    assert proc.wait(timeout=10) == 0


NAP_TOOLS = '''
import time
from pathlib import Path
from runtime import tool

@tool(timeout_s=300)
def nap() -> str:
    """Sleep long the first time (the test kills the process then)."""
    Path("nap.started").write_text("yes")
    if Path("nap-long").exists():
        time.sleep(300)
    return "rested"
'''


def test_recovery_is_shown_as_it_goes(home: Path) -> None:
    (home / "nap_tools.py").write_text(NAP_TOOLS)
    text = (home / "agent.toml").read_text().replace('modules = []', 'modules = ["nap_tools"]')
    (home / "agent.toml").write_text(text)
    (home / "nap-long").touch()
    proc = subprocess.Popen([sys.executable, "-m", "bot", "send", "t", "/tool nap"], cwd=home,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(home / "nap.started")
    finally:
        proc.kill()  # SIGKILL mid-tool: the run is left unfinished
        proc.wait()
    (home / "nap-long").unlink()
    server, banner = _serve(home)
    _stop(server)
    lines = banner.splitlines()
    recovering = next(i for i, line in enumerate(lines) if "recovering  1 unfinished" in line)
    assert lines[recovering - 1].startswith("  tools ")  # the head came first, at once
    assert "1/1 " in lines[recovering + 1] and "completed" in lines[recovering + 1]
    assert "recovered   1 unfinished run(s)" in banner and lines[-1].startswith("Ready.")


def test_a_store_that_fills_up_is_reported_and_nothing_is_lost(home: Path) -> None:
    """A full disk under a running server: /healthz says so (503, with the reason), the log
    says so once, messages are refused (not lost) while it lasts, and all is well again once
    there is room. The disk is a 2 MB tmpfs in a mount namespace of the server's own."""
    import httpx

    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed: cannot mount a small disk")
    (home / "data").mkdir()
    text = (home / "agent.toml").read_text().replace(
        'concurrency = "global"', 'concurrency = "global"\npoll_interval_s = 0.1')
    (home / "agent.toml").write_text(text)
    script = (f'mount -t tmpfs -o size=2m tmpfs "{home / "data"}" && '
              f'exec "{sys.executable}" -m bot run')
    proc = subprocess.Popen(["unshare", "--mount", "sh", "-c", script], cwd=home, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        url = banner_url(proc.stdout)
        if not url:
            proc.kill()
            _, err = proc.communicate()
            pytest.skip(f"cannot mount a tmpfs here: {err.strip()[:200]}")
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/v1/threads/t/messages", json={"text": "one"}).status_code == 200
            filler = Path(f"/proc/{proc.pid}/root") / str(home / "data").lstrip("/") / "filler"
            with filler.open("wb", buffering=0) as f, pytest.raises(OSError):
                while True:  # until the disk is full
                    f.write(b"\0" * 65536)
            health = _poll(client, lambda r: r.status_code == 503)
            assert "cannot be written" in health.json()["store"]
            refused = client.post("/v1/threads/t/messages", json={"text": "two"})
            assert refused.status_code == 503 and refused.json()["code"] == "store_error"
            filler.unlink()
            _poll(client, lambda r: r.status_code == 200)
            again = client.post("/v1/threads/t/messages", json={"text": "three"})
            assert again.status_code == 200 and again.json()["reply"] == "echo: three"
            thread = client.get("/v1/threads/t").json()
            assert [e["text"] for e in thread["entries"]["items"] if e["kind"] == "user"] == [
                "one", "three"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert err.count("the store cannot be written") == 1, err
    assert "the store can be written again" in err
    assert "Traceback" not in err


def _poll(client: Any, ok: Callable[[Any], bool], timeout_s: float = 20) -> Any:
    """GET /healthz until ``ok(response)`` (the server checks the store every 0.1 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get("/healthz")
        if ok(response):
            return response
        assert time.monotonic() < deadline, response.text
        time.sleep(0.1)
