"""MCP servers in the `maiden` commands, run as real subprocesses: `check` lists each server's
tools, `send` calls one, `run` starts them before recovery and shows them in its banner, and
the commands that need no MCP server do not load the SDK."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fakes" / "mcp_server.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def maiden(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=90, env=ENV)


def add_servers(home: Path, *, broken: bool = True, linger: bool = False, **srv: str) -> None:
    """The fake server as ``srv`` (extra keys as TOML; ``linger``: it does not end when its
    stdin closes), and a command that does not exist."""
    extra = "".join(f"{key} = {value}\n" for key, value in srv.items())
    env = f"MCP_MARKS = {json.dumps(str(home))}" + (', MCP_LINGER = "1"' if linger else "")
    text = (f"\n[[mcp_servers]]\nname = \"srv\"\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(FAKE))}]\nenv = {{ {env} }}\n{extra}")
    if broken:
        text += "\n[[mcp_servers]]\nname = \"broken\"\ncommand = \"./no-such-server\"\n"
    with (home / "agent.toml").open("a") as f:
        f.write(text)


def test_check_lists_each_servers_tools_and_says_which_failed(home: Path) -> None:
    add_servers(home, tools='["echo", "put", "drop", "gone"]', approval="{ put = true }")
    result = maiden(home, "check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"  mcp       srv (stdio {sys.executable} {FAKE}): 3 tools\n" \
           "            srv__echo (read_only)\n" \
           "            srv__put (idempotent_write, asks approval)\n" \
           "            srv__drop (non_idempotent)\n" \
           "            note: tools lists gone, which the server does not offer\n" in result.stdout
    assert "  mcp       broken (stdio ./no-such-server): FAILED to start: command not found: " \
           "./no-such-server\n" in result.stdout
    assert "Traceback" not in result.stderr


def test_check_leaves_out_tools_that_run_only_as_tasks_in_one_line(home: Path) -> None:
    with (home / "agent.toml").open("a") as f:
        f.write(f"\n[[mcp_servers]]\nname = \"srv\"\ncommand = {json.dumps(sys.executable)}\n"
                f"args = [{json.dumps(str(FAKE))}]\n"
                'env = { MCP_TASKS = "1", MCP_FAKE_TOOLS = "echo,batch" }\n')
    result = maiden(home, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"  mcp       srv (stdio {sys.executable} {FAKE}): 1 tool\n" \
           "            srv__echo (read_only)\n" \
           '            note: batch left out: it runs only as an MCP task ' \
           '(execution.taskSupport "required"), which maiden does not support\n' \
           in result.stdout
    sent = maiden(home, "send", "t", "/tool srv__batch {}")
    assert sent.returncode == 0, sent.stderr
    assert "unknown_tool" in sent.stdout  # never offered, so never called


def test_check_with_no_servers_and_an_unset_header_variable(home: Path) -> None:
    assert "  mcp       not configured\n" in maiden(home, "check").stdout
    with (home / "agent.toml").open("a") as f:
        f.write('\n[[mcp_servers]]\nname = "web"\nurl = "http://127.0.0.1:9/mcp"\n'
                'headers_env = { Authorization = "MAIDEN_TEST_NO_SUCH_VAR" }\n')
    result = maiden(home, "check")
    assert result.returncode == 1
    assert "  mcp       web (http http://127.0.0.1:9/mcp): FAILED to start: the environment " \
           "variable MAIDEN_TEST_NO_SUCH_VAR (headers_env.Authorization) is not set" \
           in result.stdout
    assert "  secret    $MAIDEN_TEST_NO_SUCH_VAR: NOT SET" in result.stdout


def test_send_calls_an_mcp_tool_and_says_which_server_did_not_start(home: Path) -> None:
    add_servers(home)
    sent = maiden(home, "send", "t", '/tool srv__echo {"text": "hi over stdio"}')
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == 'srv__echo returned "hi over stdio"\n'
    assert "mcp server 'broken' did not start (command not found: ./no-such-server); its " \
           "tools are offered once it does" in sent.stderr


def test_the_sdk_loads_only_where_a_server_is_needed(home: Path) -> None:
    script = textwrap.dedent('''
        import sys
        from bot.cli import main
        code = main(sys.argv[1:])
        print(code, "mcp" in sys.modules)
    ''')

    def loads_mcp(*args: str) -> str:
        done = subprocess.run([sys.executable, "-c", script, *args], cwd=home, env=ENV,
                              capture_output=True, text=True, timeout=90)
        return done.stdout.splitlines()[-1]

    assert loads_mcp("send", "t", "hi") == "0 False"  # no [[mcp_servers]]
    add_servers(home, broken=False)
    assert loads_mcp("threads") == "0 False"  # configured, but nothing runs here
    assert loads_mcp("send", "t", "hi") == "0 True"


@contextmanager
def serving(home: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`maiden run` in ``home``, until its banner's Ready line; killed after, if still up."""
    server = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        banner = ""
        for line in server.stdout:
            banner += line
            if line.startswith("Ready."):
                break
        yield server, banner
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stdout:
            server.stdout.close()


def test_run_starts_the_servers_before_recovering_a_run_that_was_calling_one(
    home: Path,
) -> None:
    """A run killed mid-call (SIGKILL) is recovered by `maiden run`, which starts the MCP
    servers first: the read-only call runs again and the run completes. The banner shows
    each server, the one that failed to start included."""
    add_servers(home)
    proc = subprocess.Popen([sys.executable, "-m", "bot", "send", "t",
                             '/tool srv__nap {"seconds": 600}'], cwd=home, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (home / "nap.started").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the call never started"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    with serving(home) as (server, banner):
        assert banner.endswith("Ctrl-C stops.\n"), banner
        tools = next(line for line in banner.splitlines(keepends=True)
                     if line.startswith("  tools "))
        assert "srv__echo" in tools and "srv__nap" in tools
        assert "  mcp         srv: 12 tools\n" in banner
        assert "  mcp         broken: failed to start: command not found: ./no-such-server, " \
               "retrying\n" in banner
        assert "  recovered   1 unfinished run(s)\n" in banner
        assert "on 't': completed (answered)" in banner
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    shown = maiden(home, "show", "t")
    assert 'srv__nap returned "rested"' in shown.stdout, shown.stdout


def test_a_stopped_run_leaves_no_server_process_behind(home: Path) -> None:
    """`maiden run` stopped with SIGTERM ends the stdio MCP server it started, even one
    that does not end by itself when its stdin closes (as a SIGKILLed maiden would leave
    it)."""
    add_servers(home, broken=False, linger=True)
    with serving(home) as (server, banner):
        assert "  mcp         srv: 12 tools\n" in banner, banner
        pid = int((home / "server.pid").read_text())  # written as the server started
        assert _alive(pid)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, f"the MCP server (pid {pid}) outlived maiden run"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: os.kill is all there is to go by
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
