"""The rough edges a new user met (issue 55), through the real `maiden` process: its
version, a clean banner, chat's own commands, what `approve` prints, Ctrl-C that comes too
late, a folder without agent.toml, `show`, `threads` and `files`, schedules changed from the
command line, and usage by person."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

from tests.processes.test_cli import _serve, _stop, _with_tools, maiden
from tests.processes.test_cli_chat import chat
from tests.processes.test_cli_faults import ENV, interrupt_when

VERSION = metadata.version("maiden")


def test_version_and_a_banner_of_one_clean_screen(home: Path, tmp_path: Path) -> None:
    shown = maiden(home, "--version")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"maiden {VERSION}\n", "")
    err = tmp_path / "stderr.log"
    with err.open("w") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=ENV,
                                stdout=subprocess.PIPE, stderr=errors, text=True)
        assert proc.stdout is not None
        banner = ""
        for line in proc.stdout:
            banner += line
            if line.startswith("Ready."):
                break
        _stop(proc)
    assert banner.startswith(f"maiden {VERSION}: agent 'maiden'\n"), banner
    # uvicorn's start-up lines (and the "listening" line the banner's http line says) only
    # come with -v: nothing interleaves with the banner on a terminal.
    logged = err.read_text()
    assert "uvicorn" not in logged and "Application startup" not in logged, logged
    assert "listening on" not in logged and "open files limit" not in logged, logged


def test_chat_help_is_chats_own_and_a_call_is_shown_once_around_its_approval(
        home: Path) -> None:
    _with_tools(home)
    with chat(home, "ops") as session:
        session.type("/help")
        session.until("chat's commands:")
        session.until("/quit, /exit")
        session.type('/tool restart {"service": "db"}')
        prompt = session.until("[approval needed] restart")
        command = prompt.split("`maiden approve ", 1)[1].split("`", 1)[0].split()
        session.until("[waiting for that")
        assert maiden(home, "approve", *command).returncode == 0
        session.until('bot> restart returned "restarted db"')
        session.type("/quit")
        out = session.rest()
    assert out.count('[tool] restart {"service": "db"}') == 1, out  # not again once approved
    assert '[tool] restart ok: "restarted db"' in out
    assert "echo: /help" not in out
    assert len(maiden(home, "runs", "--thread", "ops").stdout.splitlines()) == 1  # no /help run


def test_approve_prints_the_replies_of_the_messages_queued_behind(home: Path) -> None:
    _with_tools(home)
    queued = {"ops": ["and then?", "and after that?"], "ops2": ["and then?"]}
    for thread, texts in queued.items():
        paused = maiden(home, "send", thread, '/tool restart {"service": "db"}')
        assert paused.returncode == 3, paused.stderr
        for text in texts:
            assert maiden(home, "send", thread, text).returncode == 3
    waiting = maiden(home, "runs", "--state", "awaiting_approval").stdout
    ids = {line.split("thread=")[1].split()[0]: line.split()[0]
           for line in waiting.splitlines() if "thread=" in line}

    here = maiden(home, "approve", ids["'ops'"], "echo_0")
    assert here.returncode == 0, here.stderr
    assert here.stdout == 'restart returned "restarted db"\necho: and then?\n' \
                          "echo: and after that?\n"
    assert "the message queued behind it: 'and then?'" in here.stderr

    server, _ = _serve(home)  # the run and the one behind it go on in the serving process
    try:
        there = maiden(home, "approve", ids["'ops2'"], "echo_0")
    finally:
        _stop(server)
    assert there.returncode == 0, there.stderr
    assert there.stdout == 'restart returned "restarted db"\necho: and then?\n'


STUBBORN = '''
import asyncio
from pathlib import Path
from runtime import tool

@tool(timeout_s=60)
async def stubborn() -> str:
    """Finish whatever happens: a cancellation does not stop it."""
    Path("stubborn.started").write_text("yes")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        return "finished anyway"
    return "finished"
'''


def test_ctrl_c_that_comes_too_late_says_the_run_finished_first(home: Path) -> None:
    """The tool ignores the cancellation: the run completes although Ctrl-C came while it
    worked, and `send` says so rather than "cancelling" and an answer as if nothing was."""
    (home / "late_tools.py").write_text(STUBBORN)
    text = (home / "agent.toml").read_text().replace("modules = []", 'modules = ["late_tools"]')
    (home / "agent.toml").write_text(text)
    proc = subprocess.Popen([sys.executable, "-m", "bot", "send", "t", "/tool stubborn"],
                            cwd=home, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = interrupt_when(proc, home / "stubborn.started")
    assert proc.returncode == 0, err
    assert out == 'stubborn returned "finished anyway"\n'
    run_id = err.split("cancelling run ", 1)[1].split()[0]
    assert err.endswith(f"maiden: run {run_id} completed before the cancellation could "
                        "stop it: it was not cancelled\n"), err
    assert "already ended" not in err


def test_without_agent_toml_one_line_says_which_config_and_store(tmp_path: Path) -> None:
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    sent = maiden(empty, "send", "t", "hi")
    assert sent.returncode == 0 and sent.stdout == "echo: hi\n"
    assert sent.stderr == (f"maiden: no config at {empty / 'agent.toml'}: every default "
                           f"applies; store: sqlite at {empty / 'data' / 'maiden.db'} "
                           "(--config PATH names another)\n")
    assert maiden(empty, "check").stderr == ""  # check says what it uses itself


def test_show_indents_a_reply_as_a_block_and_lists_take_limits(home: Path) -> None:
    assert maiden(home, "send", "t", "first line\nsecond line").returncode == 0
    assert maiden(home, "send", "t", "and the last").returncode == 0
    shown = maiden(home, "show", "t").stdout
    assert "    echo: first line\n    second line\n" in shown, shown
    tail = maiden(home, "show", "t", "--tail", "2")
    assert tail.returncode == 0, tail.stderr
    assert "thread 't': 4 entries (the last 2 shown), 2 runs" in tail.stdout
    assert "[3] " in tail.stdout and "[2] " not in tail.stdout
    assert "echo: and the last" in tail.stdout and "first line" not in tail.stdout
    assert tail.stdout.split("runs:\n", 1)[1].count("completed ") == 1  # only its run

    for thread in ("a", "b"):
        assert maiden(home, "send", thread, "hi").returncode == 0
    listed = maiden(home, "threads", "--limit", "2").stdout.splitlines()
    assert [line.split()[0] for line in listed[:2]] == ["'b'", "'a'"]
    assert listed[2] == "(the 2 most recently active; more with a higher --limit)"


def test_files_shows_each_files_name_and_thread(home: Path) -> None:
    (home / "notes.txt").write_text("kept\n")
    assert maiden(home, "send", "support/1", "read", "--file", "notes.txt").returncode == 0
    listed = maiden(home, "files").stdout.splitlines()
    assert listed[0] == "1 file(s), 5 bytes"
    assert listed[2] == "    notes.txt  in thread 'support/1'"


def test_schedules_pause_resume_and_delete_from_the_command_line(home: Path) -> None:
    with (home / "agent.toml").open("a") as f:
        f.write(textwrap.dedent("""
            [[schedules]]
            name = "standup"
            cron = "0 9 * * 1-5"
            prompt = "what is on today?"
            """))
    paused = maiden(home, "schedules", "pause", "standup")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("schedule 'standup' paused")
    assert "(paused)" in maiden(home, "schedules").stdout
    resumed = maiden(home, "schedules", "resume", "standup")
    assert resumed.stdout.startswith("schedule 'standup' resumed: it fires from its next slot")
    kept = maiden(home, "schedules", "delete", "standup")
    assert (kept.returncode, kept.stderr) == (
        2, "maiden: 'standup' is defined in agent.toml: remove it there (or pause it)\n")

    made = maiden(home, "send", "ops", '/tool schedule_create {"name": "nightly", '
                  '"cron": "0 2 * * *", "prompt": "the nightly check"}')
    assert made.returncode == 0, made.stderr
    deleted = maiden(home, "schedules", "delete", "nightly")
    assert (deleted.returncode, deleted.stdout) == (0, "schedule 'nightly' deleted\n")
    listed = maiden(home, "schedules").stdout
    assert "nightly" not in listed and "standup" in listed and "(paused)" not in listed
    missing = maiden(home, "schedules", "pause", "nightly")
    assert (missing.returncode, missing.stderr) == (
        2, "maiden: there is no schedule named 'nightly'\n")


def test_usage_by_person_names_the_cli_local(home: Path) -> None:
    assert maiden(home, "send", "t", "hi").returncode == 0
    rows = maiden(home, "usage", "--by", "user").stdout.splitlines()
    assert rows[1].split()[:2] == ["local", "1"], rows
    assert "(nobody)" not in "\n".join(rows)


def test_a_run_resumed_after_a_cancel_during_its_approval_asks_again(home: Path) -> None:
    _with_tools(home)
    assert maiden(home, "send", "ops", '/tool restart {"service": "db"}').returncode == 3
    run_id = maiden(home, "runs", "--state", "awaiting_approval").stdout.split()[0]
    assert maiden(home, "cancel", run_id).returncode == 0
    resumed = maiden(home, "resume", run_id)
    assert resumed.returncode == 3, resumed.stderr
    assert "is waiting for approval (requires_approval) of restart" in resumed.stderr
    call = resumed.stderr.split(f"maiden approve {run_id} ", 1)[1].split()[0]
    assert call != "echo_0"  # a new call: the first one has its `cancelled` result
    approved = maiden(home, "approve", run_id, call)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == 'restart returned "restarted db"\n'
    assert (home / "restarts.log").read_text() == "db\n"
