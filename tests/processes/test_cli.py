"""The `maiden` command, run as a real subprocess on a real store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

from tests.samples import png

ROOT = Path(__file__).resolve().parents[2]


def maiden(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=60, env=env)


def test_send_runs_a_tool_and_show_shows_every_entry(home: Path) -> None:
    sent = maiden(home, "send", "t1", '/tool clock {"tz": "UTC"}')
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith('clock returned {"tz": "UTC", "iso": "')
    assert (home / "data" / "maiden.db").exists()

    again = maiden(home, "send", "t1", "hello again")
    assert again.returncode == 0 and again.stdout == "echo: hello again\n"

    shown = maiden(home, "show", "t1")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "6 entries, 2 runs" in out
    order = ["user (run", '-> calls clock {"tz": "UTC"}', "tool clock result", "clock returned",
             "hello again", "echo: hello again"]
    positions = [out.index(marker) for marker in order]
    assert positions == sorted(positions), out
    assert "queued -> running: started" in out

    threads = maiden(home, "threads")
    assert "'t1'  entries=6 runs=2 last=completed" in threads.stdout
    runs = maiden(home, "runs", "--state", "completed")
    assert runs.stdout.count("completed ") == 2


def test_failed_run_exits_non_zero(home: Path) -> None:
    (home / "script.json").write_text("[]")
    (home / "agent.toml").write_text("[provider]\nkind = 'scripted'\nscript = 'script.json'\n")
    result = maiden(home, "send", "t", "hi")
    assert result.returncode == 1
    assert "failed: provider_error: the script has 0 turns" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_errors_name_the_key_without_a_traceback(home: Path) -> None:
    (home / "agent.toml").write_text("[agent]\nmax_turns = 'many'\nbogus = 1\n")
    result = maiden(home, "send", "t", "hi")
    assert result.returncode == 2
    assert "agent.toml: agent.max_turns: Input should be a valid integer" in result.stderr
    assert "agent.toml: agent.bogus: unknown key" in result.stderr
    assert "Traceback" not in result.stderr
    missing = maiden(home, "--config", "elsewhere.toml", "check")
    assert missing.returncode == 2 and "elsewhere.toml: file not found" in missing.stderr


def test_check_reports_configuration_and_missing_secrets(home: Path) -> None:
    ok = maiden(home, "check")
    assert ok.returncode == 0, ok.stderr
    assert "provider  echo" in ok.stdout and "clock (read_only)" in ok.stdout
    (home / "agent.toml").write_text("[provider]\napi_key_env = 'MAIDEN_TEST_UNSET_KEY'\n")
    missing = maiden(home, "check")
    assert missing.returncode == 1
    assert "$MAIDEN_TEST_UNSET_KEY: NOT SET" in missing.stdout


def test_chat_shows_tool_calls_as_they_happen(home: Path) -> None:
    result = maiden(home, "chat", "--thread", "c1",
                    stdin='hi there\n/tool clock {"tz": "Europe/Paris"}\n/quit\n')
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "bot> echo: hi there" in out
    assert '[tool] clock {"tz": "Europe/Paris"}' in out
    assert "[tool] clock ok:" in out and "bot> clock returned" in out
    assert maiden(home, "show", "c1").stdout.count("user (run") == 2


def test_approve_from_the_cli(home: Path) -> None:
    (home / "ops_tools.py").write_text(textwrap.dedent('''
        from pathlib import Path
        from runtime import tool

        @tool(effect="non_idempotent", requires_approval=True)
        def restart(service: str) -> str:
            """Restart a service."""
            with Path("restarts.log").open("a") as f:
                f.write(service + "\\n")
            return f"restarted {service}"
    '''))
    text = (home / "agent.toml").read_text().replace('modules = []', 'modules = ["ops_tools"]')
    (home / "agent.toml").write_text(text)

    paused = maiden(home, "send", "ops", '/tool restart {"service": "db"}')
    assert paused.returncode == 3, paused.stderr
    assert "waiting for approval (requires_approval) of restart" in paused.stderr
    assert not (home / "restarts.log").exists()
    listed = maiden(home, "runs", "--state", "awaiting_approval")
    run_id = listed.stdout.split()[0]
    assert "waiting for approval of restart" in listed.stdout

    approved = maiden(home, "approve", run_id, "echo_0", "--by", "ops-lead")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith('restart returned "restarted db"')
    assert (home / "restarts.log").read_text() == "db\n"
    shown = maiden(home, "show", "ops").stdout
    assert "decision: approved call echo_0 by ops-lead" in shown


def test_run_serves_until_sigterm(home: Path) -> None:
    proc, banner = _serve(home)
    assert "provider    echo" in banner and "recovered   0 unfinished run(s)" in banner
    assert "  http        http://127.0.0.1:" in banner
    url = banner.split("  http        ", 1)[1].split()[0]
    try:
        console = httpx.get(url + "/", timeout=10)  # the operator console: loopback, no token
    finally:
        _stop(proc)  # SIGTERM: exits 0
    assert console.status_code == 200
    assert "<strong>http</strong> serving http://127.0.0.1:" in console.text


def test_show_unknown_thread(home: Path) -> None:
    result = maiden(home, "show", "nope")
    assert result.returncode == 1 and "no thread 'nope'" in result.stderr


def test_hostile_thread_ids_stay_apart(home: Path) -> None:
    (home / "agent.toml").write_text("[store]\nkind = 'files'\npath = 'data/files'\n")
    for thread in ["a/b", "a_b", "../a", "a%2Fb"]:
        assert maiden(home, "send", thread, f"for {thread}").returncode == 0
    for thread in ["a/b", "a_b", "../a", "a%2Fb"]:
        out = maiden(home, "show", thread).stdout
        assert "2 entries" in out and f"echo: for {thread}" in out
    inside = [p.resolve() for p in (home / "data" / "files").rglob("*")]
    assert all(str(p).startswith(str((home / "data" / "files").resolve())) for p in inside)
    assert not (home / "a").exists()


SLOW_TOOLS = '''
import asyncio
from pathlib import Path
from runtime import tool

@tool(effect="non_idempotent", requires_approval=True)
def restart(service: str) -> str:
    """Restart a service."""
    with Path("restarts.log").open("a") as f:
        f.write(service + "\\n")
    return f"restarted {service}"

@tool(timeout_s=300)
async def slow() -> str:
    """Take a long time."""
    Path("slow.started").write_text("yes")
    await asyncio.sleep(300)
    return "never"
'''


def _with_tools(home: Path) -> None:
    (home / "ops_tools.py").write_text(SLOW_TOOLS)
    text = (home / "agent.toml").read_text().replace('modules = []', 'modules = ["ops_tools"]')
    text = text.replace(
        'concurrency = "global"', 'concurrency = "global"\npoll_interval_s = 0.1')
    (home / "agent.toml").write_text(text)


def _serve(home: Path) -> tuple[subprocess.Popen[str], str]:
    """`maiden run` in ``home``, up to its Ready line; returns the process and its banner."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ready."):
            return proc, "".join(lines)
    proc.kill()
    raise AssertionError("maiden run did not start:\n" + "".join(lines))


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def test_approve_and_cancel_reach_a_running_server(home: Path) -> None:
    _with_tools(home)
    first = maiden(home, "send", "ops", '/tool restart {"service": "db"}')
    second = maiden(home, "send", "ops2", '/tool restart {"service": "cache"}')
    assert first.returncode == second.returncode == 3
    runs = maiden(home, "runs", "--state", "awaiting_approval").stdout.split("\n")
    ids = {line.split("thread=")[1].split()[0]: line.split()[0] for line in runs
           if "thread=" in line}
    server, _ = _serve(home)
    try:
        approved = maiden(home, "approve", ids["'ops'"], "echo_0", "--by", "lead")
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith('restart returned "restarted db"')
        cancelled = maiden(home, "cancel", ids["'ops2'"])
        assert cancelled.returncode == 0 and "cancelled: cancelled by cli" in cancelled.stdout
    finally:
        _stop(server)
    assert (home / "restarts.log").read_text() == "db\n"
    assert "decision: approved call echo_0 by lead" in maiden(home, "show", "ops").stdout


def test_ctrl_c_in_chat_cancels_the_reply_not_the_chat(home: Path) -> None:
    _with_tools(home)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "chat", "--thread", "c"], cwd=home,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("/tool slow\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if "[tool] slow" in line:
                break
        proc.send_signal(signal.SIGINT)
        for line in proc.stdout:
            if "[cancelled" in line:
                assert "cancelled by terminal" in line
                break
        proc.stdin.write("still there?\n/quit\n")
        proc.stdin.flush()
        rest = proc.stdout.read()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream:
                stream.close()
    assert "bot> echo: still there?" in rest


def test_usage_totals_by_thread(home: Path) -> None:
    maiden(home, "send", "a", "one")
    maiden(home, "send", "a", "two")
    maiden(home, "send", "b", "three")
    out = maiden(home, "usage", "--since", "1d").stdout
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert lines["a"][1] == "2" and lines["b"][1] == "1" and lines["total"][1] == "3"
    bad = maiden(home, "usage", "--since", "last tuesday")
    assert bad.returncode == 2 and "ISO date" in bad.stderr


CHARGE_TOOLS = '''
import os, signal
from pathlib import Path
from runtime import tool

@tool(effect="non_idempotent")
def charge(amount: int) -> str:
    """Charge a card."""
    with Path("charges.log").open("a") as f:
        f.write(f"{amount}\\n")
        f.flush()
        os.fsync(f.fileno())
    if Path("die-once").exists():
        Path("die-once").unlink()
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies right after the effect
    return "charged"
'''


def test_an_uncertain_call_after_kill_9_waits_for_a_person(home: Path) -> None:
    (home / "pay_tools.py").write_text(CHARGE_TOOLS)
    text = (home / "agent.toml").read_text().replace('modules = []', 'modules = ["pay_tools"]')
    (home / "agent.toml").write_text(text)
    (home / "die-once").touch()
    killed = maiden(home, "send", "pay", '/tool charge {"amount": 5}')
    assert killed.returncode == -signal.SIGKILL
    assert (home / "charges.log").read_text() == "5\n"

    # The next message on the thread recovers the run first; the charge may or may not
    # have gone through, so it is not re-run: a person is asked.
    queued = maiden(home, "send", "pay", "did it work?")
    assert queued.returncode == 3 and "queued" in queued.stderr
    waiting = maiden(home, "runs", "--state", "awaiting_approval").stdout
    assert "uncertain_side_effect" in waiting and "recovered after crash x1" in waiting
    run_id = waiting.split()[0]

    denied = maiden(home, "approve", run_id, "echo_0", "--deny", "--reason", "already charged")
    assert denied.returncode == 0, denied.stderr
    assert "denied" in denied.stdout
    assert (home / "charges.log").read_text() == "5\n"  # never twice
    shown = maiden(home, "show", "pay").stdout
    assert "echo: did it work?" in shown  # the message queued behind it was answered too


def test_a_closed_pipe_is_not_a_traceback(home: Path) -> None:
    for i in range(4):  # well over a pipe's 64 KiB buffer
        maiden(home, "send", "p", f"message {i} " + "x" * 12_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "show", "p"], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=30) in (0, 141)
    assert "Traceback" not in err


def test_send_with_files_shows_what_the_model_received(home: Path) -> None:
    (home / "error.log").write_text("ERROR disk full\n")
    (home / "shot.png").write_bytes(png(40, 30))
    sent = maiden(home, "send", "t1", "why?", "--file", "error.log", "--file", "shot.png")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.splitlines() == [
        "echo: why?",
        "[received error.log (text/plain, 16 bytes), shown as 75 characters of text]",
        "[received shot.png (image/png, 40x30, " + sent.stdout.split("40x30, ")[1].split(")")[0]
        + "), shown as a note]"]
    shown = maiden(home, "show", "t1")
    assert "[file error.log (text/plain, 16 bytes) sha256:" in shown.stdout
    missing = maiden(home, "send", "t1", "and?", "--file", "nope.txt")
    assert missing.returncode == 2 and "--file nope.txt: No such file" in missing.stderr


def test_a_file_a_tool_made_is_saved_beside_the_config(home: Path) -> None:
    (home / "maketools.py").write_text(textwrap.dedent("""
        from runtime import ToolFile, tool

        @tool
        def export() -> ToolFile:
            \"\"\"Export the report.\"\"\"
            return ToolFile("report.csv", "text/csv", b"a,b\\n1,2\\n")
        """))
    (home / "script.json").write_text(
        '[{"tool_calls": [{"name": "export", "arguments": {}}]}, {"text": "Saved it."}]')
    (home / "agent.toml").write_text("[provider]\nkind = 'scripted'\nscript = 'script.json'\n"
                                     "[tools]\nmodules = ['maketools']\n")
    sent = maiden(home, "send", "t", "export")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == "Saved it.\n"
    (saved,) = (home / "data" / "files").glob("*/report.csv")
    assert saved.read_bytes() == b"a,b\n1,2\n"
    assert f"saved report.csv (text/csv, 8 bytes) to {saved}" in sent.stderr


def test_files_lists_and_prune_removes_only_what_no_message_names(home: Path) -> None:
    (home / "a.txt").write_text("kept\n")
    assert maiden(home, "send", "t", "read", "--file", "a.txt").returncode == 0
    listed = maiden(home, "files")
    assert listed.stdout.startswith("1 file(s), 5 bytes\n")
    with (home / "agent.toml").open("a") as f:
        f.write("\n[files]\nretention_days = 0\n")
    kept = maiden(home, "files", "prune", "--dry-run")
    assert kept.returncode == 0 and kept.stdout.startswith("would remove 0 file(s)"), kept.stderr
    assert maiden(home, "files", "prune").stdout.startswith("removed 0 file(s)")
    assert maiden(home, "files").stdout.startswith("1 file(s)")


def test_a_file_over_a_files_limit_is_a_usage_error(home: Path) -> None:
    (home / "big.log").write_bytes(b"x" * 2_000)
    with (home / "agent.toml").open("a") as f:
        f.write("\n[files]\nmax_bytes = 1000\nmax_per_message = 2\n")
    big = maiden(home, "send", "t1", "why?", "--file", "big.log")
    assert big.returncode == 2, big.stderr
    assert big.stderr == \
        "maiden: --file big.log: it is 2 KB; at most 1 KB are read ([files] max_bytes)\n"
    (home / "a.txt").write_text("a\n")
    many = maiden(home, "send", "t1", "why?", *["--file", "a.txt"] * 3)
    assert many.returncode == 2, many.stderr
    assert many.stderr == "maiden: --file given 3 times: at most 2 are read from one message " \
                          "([files] max_per_message)\n"
    assert "'t1'" not in maiden(home, "threads").stdout  # no message was sent


def test_migrate_from_a_store_that_is_not_there_creates_nothing(home: Path) -> None:
    for source in ("sqlite:data/nonexist.db", "files:data/nonexist"):
        moved = maiden(home, "migrate", "--from", source, "--to", "files:data/x")
        assert moved.returncode == 2, moved.stdout + moved.stderr
        kind = "database file" if source.startswith("sqlite") else "store folder"
        where = home / "data" / source.split(":data/")[1]
        assert moved.stderr == f"maiden: --from {source}: there is no {kind} at {where}\n"
        assert moved.stdout == ""
        assert sorted(p.name for p in home.iterdir()) == ["agent.toml"]
