"""A shell command cannot read maiden's secrets through /proc (``cat /proc/$PPID/environ``),
under bubblewrap or, without it, because maiden is non-dumpable; as root, because the
command runs as ``[tools.shell] run_as`` (nobody), either way; and under bubblewrap a
cancelled command's whole tree still dies."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolContext,
    ToolRegistry,
)
from runtime.builtins.shell import make_shell
from runtime.model.config import ShellConfig
from runtime.tools.isolation import bwrap_usable, choose_user, euid

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

ROOT = Path(__file__).resolve().parents[2]
PEEK = "cat /proc/$PPID/environ"
SETPRIV = shutil.which("setpriv")
COMMANDS_AS = choose_user(euid(), "nobody")
"""Whom a maiden of this process's uid runs commands as (None: its own user)."""


def needs_bwrap() -> None:
    why_not = bwrap_usable(COMMANDS_AS)
    if why_not is not None:
        pytest.skip(f"bubblewrap is not usable here: {why_not}")


def peek_through_send(home: Path, sandbox: str, as_user: list[str],
                      command: str = PEEK) -> tuple[str, str]:
    """`maiden send` runs the shell tool with ``command`` while a secret is in maiden's
    environment; the secret and what the tool answered."""
    (home / "agent.toml").write_text(
        '[tools]\nbuiltins = ["shell"]\n'
        f'[tools.shell]\nrequires_approval = false\nsandbox = "{sandbox}"\n'
        '[store]\npath = "maiden.db"\n')
    secret = "sk-ant-" + secrets.token_hex(16)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": secret,
           "MAIDEN_TEST_SECRET": secret, "HOME": str(home)}
    message = "/tool shell " + json.dumps({"command": command})
    sent = subprocess.run([*as_user, sys.executable, "-m", "bot", "send", "t", message],
                          cwd=home, capture_output=True, text=True, timeout=60, env=env)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith("shell returned"), sent.stdout
    return secret, sent.stdout + sent.stderr


def test_under_bwrap_the_command_cannot_read_maidens_environment(shared_tmp: Path) -> None:
    needs_bwrap()
    secret, said = peek_through_send(shared_tmp, "auto", [])
    assert secret not in said
    # What it read was bwrap's init (pid 1 of its namespace), with the scrubbed environment.
    assert "PATH=" in said


def test_without_bwrap_a_non_root_command_cannot_read_maidens_environment(
        shared_tmp: Path) -> None:
    if os.geteuid() != 0:
        as_user: list[str] = []  # already a user without CAP_SYS_PTRACE
    elif SETPRIV is not None:
        shutil.chown(shared_tmp, "nobody")
        as_user = [SETPRIV, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
    else:
        pytest.skip("running as root without setpriv: root reads any /proc environ")
    secret, said = peek_through_send(shared_tmp, "off", as_user)
    assert secret not in said
    assert "Permission denied" in said


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_as_root_the_command_runs_as_nobody_and_cannot_read_maidens_environment(
        shared_tmp: Path, sandbox: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: commands run as maiden's own user")
    # Under bwrap (auto, when it works here) $PPID is bwrap's init; off, it is maiden.
    secret, said = peek_through_send(shared_tmp, sandbox, [], command=f"id -u; {PEEK}")
    assert secret not in said
    assert '"stdout": "65534\\n' in said, said  # nobody
    if sandbox == "off" or bwrap_usable(COMMANDS_AS) is not None:
        assert "Permission denied" in said, said


def test_as_root_an_unknown_run_as_user_refuses_the_shell_tool_at_start(
        shared_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: run_as is not used")
    (shared_tmp / "agent.toml").write_text(
        '[tools]\nbuiltins = ["shell"]\n[tools.shell]\nrun_as = "no-such-user-here"\n')
    checked = subprocess.run([sys.executable, "-m", "bot", "check"], cwd=shared_tmp,
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert checked.returncode == 2, checked.stdout + checked.stderr
    [problem] = [ln for ln in checked.stderr.splitlines() if "tools.shell.run_as" in ln]
    assert "no user 'no-such-user-here'" in problem, checked.stderr


def host_processes(token: str) -> list[int]:
    """Live (not zombie) processes, seen from outside any namespace, whose command line
    holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def test_bwrap_cancellation_kills_the_whole_tree(shared_tmp: Path) -> None:
    needs_bwrap()
    naps = str(100_000 + secrets.randbelow(800_000))  # a sleep no one else is running
    # SIGTERM ignored by the shell and its children: SIGKILL after the grace.
    command = f"trap '' TERM; sleep {naps} & sleep {naps} & echo > started; wait"
    call = {"name": "shell", "arguments": {"command": command}}
    script: list[dict[str, Any]] = [{"tool_calls": [call]}, {"text": "next"}]
    tool = make_shell(ShellConfig(requires_approval=False), shared_tmp)
    async with SQLiteStore(shared_tmp / "maiden.db") as store:
        rt = Runtime(store, ScriptedProvider(script), ToolRegistry([tool]),
                     settings=RuntimeConfig(cancel_grace_s=0.3))
        async with rt:
            run = await rt.submit("t", "go")
            async with asyncio.timeout(20):
                while len(host_processes(f"sleep {naps}")) < 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            ended = await asyncio.wait_for(rt.cancel(run.id), 20)
    assert ended.state is RunState.CANCELLED
    async with asyncio.timeout(5):  # a SIGKILLed process may need a moment to go
        while host_processes(f"sleep {naps}"):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_check_says_which_isolation_is_in_effect(shared_tmp: Path, sandbox: str) -> None:
    (shared_tmp / "agent.toml").write_text(
        f'[tools]\nbuiltins = ["shell"]\n[tools.shell]\nsandbox = "{sandbox}"\n')
    checked = subprocess.run([sys.executable, "-m", "bot", "check"], cwd=shared_tmp,
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert checked.returncode == 0, checked.stderr
    line = next(ln for ln in checked.stdout.splitlines() if ln.startswith("  isolation "))
    if sandbox == "auto" and bwrap_usable(COMMANDS_AS) is None:
        assert line.startswith("  isolation bubblewrap sandbox (own PID namespace and /proc)")
    else:
        assert line.startswith("  isolation no sandbox ("), line
        assert "maiden's environment is not readable to it" in line
    if os.geteuid() == 0:
        assert ", as nobody (uid 65534)" in line, line
    else:
        assert ", as maiden's own user" in line, line


def hello_script(folder: Path) -> str:
    """An executable ``hello.sh`` in ``folder``; the folder's real path."""
    script = folder / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from $PWD\n")
    script.chmod(0o755)
    return str(folder.resolve())


async def test_under_bwrap_an_allowed_script_runs_from_the_workdir(shared_tmp: Path) -> None:
    needs_bwrap()
    workdir = hello_script(shared_tmp)
    tool = make_shell(ShellConfig(requires_approval=False, allow=["./hello.sh"]), shared_tmp)
    ctx = ToolContext(run_id="r", thread_id="t", tool_call_id="c", idempotency_key="k")
    out = await asyncio.wait_for(tool.invoke(ctx, {"command": "./hello.sh"}), 30)
    assert out["stdout"] == f"hello from {workdir}\n", out
