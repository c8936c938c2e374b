"""The ``shell`` built-in through the loop: approval, the allowlist, the output cap, and a
timeout or a cancellation killing the whole tree (``run_process`` underneath it:
``tools/test_process.py``)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    ConfigError,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolsConfig,
)
from runtime.builtins import builtin_tools
from runtime.builtins.shell import _shell_syntax, make_shell
from runtime.model.config import ShellConfig
from tests.runtime.tools.children import gone, pid_in, until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shells and signals")

S = RunState


def call(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def shell(tmp_path: Path, **settings: Any) -> Tool:
    return make_shell(ShellConfig(**{"requires_approval": False, **settings}), tmp_path)


def ctx(grace_s: float = 5.0) -> ToolContext:
    return ToolContext(run_id="r", thread_id="t", tool_call_id="c", idempotency_key="k",
                       cancel_grace_s=grace_s)


def result_of(entries: Sequence[Any]) -> ToolResult:
    return next(e for e in entries if isinstance(e, ToolResult))


@asynccontextmanager
async def runtime_with_grace(
    tmp_path: Path, script: Sequence[dict[str, Any]], tools: Sequence[Tool], grace_s: float,
) -> AsyncIterator[Runtime]:
    """Like the ``make_runtime`` fixture, with ``[runtime] cancel_grace_s`` set."""
    async with SQLiteStore(tmp_path / "maiden.db") as store:
        rt = Runtime(store, ScriptedProvider(script), ToolRegistry(tools),
                     settings=RuntimeConfig(cancel_grace_s=grace_s))
        async with rt:
            yield rt


def running_in_group(pgid: int, program: bytes) -> int:
    """How many processes of group ``pgid`` run ``program`` (have exec'd it, on Linux)."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) == pgid and cmdline.startswith(program):
            count += 1
    return count


# -- through the loop ------------------------------------------------------------------------


async def test_a_command_runs_through_the_loop(make_runtime: Any, shared_tmp: Path) -> None:
    async with make_runtime([call("echo hi"), {"text": "done"}], [shell(shared_tmp)]) as (rt, p):
        run = await asyncio.wait_for(rt.send("t", "say hi"), 10)
        entries = await rt.records.entries("t")
    assert run.state is S.COMPLETED and run.reply == "done"
    result = result_of(entries)
    assert not result.is_error
    assert result.content == {"exit_code": 0, "stdout": "hi\n", "stderr": "", "truncated": False,
                              "timed_out": False}
    p.assert_complete()


async def test_the_command_runs_in_the_workdir_with_its_status_and_stderr(
        shared_tmp: Path) -> None:
    (shared_tmp / "work").mkdir()
    tool = shell(shared_tmp, workdir="work")
    out = await tool.invoke(ctx(), {"command": "pwd; echo oops >&2; exit 3"})
    assert out == {"exit_code": 3, "stdout": f"{(shared_tmp / 'work').resolve()}\n",
                   "stderr": "oops\n", "truncated": False, "timed_out": False}


async def test_a_command_waits_for_approval_by_default(make_runtime: Any, shared_tmp: Path) -> None:
    tool = make_shell(ShellConfig(), shared_tmp)
    assert (tool.name, tool.effect, tool.requires_approval) == ("shell", "non_idempotent", True)
    async with make_runtime([call("touch made"), {"text": "done"}], [tool]) as (rt, _):
        paused = await asyncio.wait_for(rt.send("t", "make it"), 10)
        assert paused.state is S.AWAITING_APPROVAL and paused.pending_approval is not None
        assert paused.pending_approval.name == "shell"
        assert paused.pending_approval.arguments == {"command": "touch made"}
        assert not (shared_tmp / "made").exists()
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True, by="ann")
        run = await asyncio.wait_for(rt.wait(paused.id), 10)
    assert run.state is S.COMPLETED and (shared_tmp / "made").exists()


def test_the_builtin_is_made_from_its_settings(shared_tmp: Path) -> None:
    cfg = ToolsConfig(builtins=["shell"], shell=ShellConfig(timeout_s=20))
    [tool] = builtin_tools(cfg, shared_tmp)
    assert (tool.name, tool.effect, tool.requires_approval) == ("shell", "non_idempotent", True)
    assert tool.timeout_s > 20  # the tool stops the command itself; the loop's is a backstop
    assert list(tool.spec.parameters["properties"]) == ["command"]


def test_a_missing_workdir_or_an_empty_prefix_is_a_config_error(shared_tmp: Path) -> None:
    with pytest.raises(ConfigError, match=r"tools\.shell\.workdir: .*nowhere"):
        make_shell(ShellConfig(workdir="nowhere"), shared_tmp)
    with pytest.raises(ConfigError, match=r"tools\.shell\.allow: an empty entry"):
        make_shell(ShellConfig(allow=["ls", " "]), shared_tmp)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="run_as applies when maiden is root")


@root_only
@pytest.mark.parametrize(("run_as", "reason"), [
    ("no-such-user-here", "no user 'no-such-user-here' on this machine"),
    ("root", "'root' is root (uid 0)"),
    ("0", "'0' is root (uid 0)"),
])
def test_as_root_an_unusable_run_as_refuses_the_tool(shared_tmp: Path, run_as: str,
                                                     reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_shell(ShellConfig(run_as=run_as), shared_tmp)
    [(key, said)] = caught.value.problems
    assert key == "tools.shell.run_as" and said.startswith(reason), said
    assert "\n" not in str(caught.value)  # one line


@root_only
def test_as_root_a_workdir_the_user_cannot_enter_refuses_the_tool(tmp_path: Path) -> None:
    # pytest's tmp_path is private to root (0700 above it).
    with pytest.raises(ConfigError) as caught:
        make_shell(ShellConfig(), tmp_path)
    [(key, said)] = caught.value.problems
    assert key == "tools.shell.workdir" and said.startswith("'nobody' (uid 65534)"), said
    assert f"cannot enter {tmp_path.resolve()}" in said


@root_only
async def test_as_root_a_command_runs_as_run_as_with_its_home(shared_tmp: Path) -> None:
    out = await shell(shared_tmp, sandbox="off").invoke(
        ctx(), {"command": "id -u; id -g; id -G; echo $HOME $USER; touch made"})
    assert out["stdout"] == "65534\n65534\n65534\n/nonexistent nobody\n", out
    assert (shared_tmp / "made").stat().st_uid == 65534


def test_not_root_run_as_is_not_used(shared_tmp: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("as root run_as is used")
    make_shell(ShellConfig(run_as="no-such-user-here"), shared_tmp)


# -- the allowlist ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    "git status; rm -rf x",
    "git status && rm -rf x",
    "git status | sh",
    "git status `rm -rf x`",
    "git status $(rm -rf x)",
    'git status "$(rm -rf x)"',
    "git status > x",
    "git status\nrm -rf x",
    "ls && id",
    "ls; id",
    "ls $HOME",
])
async def test_the_allowlist_refuses_shell_syntax(shared_tmp: Path, command: str) -> None:
    (shared_tmp / "x").mkdir()
    tool = shell(shared_tmp, allow=["git status", "ls"])
    with pytest.raises(PermissionError, match=r"^refused: .*\[tools\.shell\] allow") as err:
        await tool.invoke(ctx(), {"command": command})
    assert "without a shell" in str(err.value)
    assert (shared_tmp / "x").exists()


@pytest.mark.parametrize("command", [
    "git stash", "git statusx", "gitstatus", "id", "rm -rf x", "/bin/ls", "sh -c ls"])
async def test_the_allowlist_refuses_other_commands(shared_tmp: Path, command: str) -> None:
    tool = shell(shared_tmp, allow=["git status", "ls"])
    with pytest.raises(PermissionError, match=r"^refused: .*\[tools\.shell\] allow "
                                              r"\('git status', 'ls'\)"):
        await tool.invoke(ctx(), {"command": command})


async def test_the_allowlist_runs_allowed_commands_without_a_shell(shared_tmp: Path) -> None:
    (shared_tmp / "a file").write_text("")
    tool = shell(shared_tmp, allow=["ls", "echo"])
    listed = await tool.invoke(ctx(), {"command": "ls -la"})
    assert listed["exit_code"] == 0 and "a file" in listed["stdout"]
    # Quoted, the characters are plain arguments, as the words say.
    echoed = await tool.invoke(ctx(), {"command": "echo 'a;b' \"c|d\" e\\&f '$HOME'"})
    assert echoed["stdout"] == "a;b c|d e&f $HOME\n"
    with pytest.raises(FileNotFoundError, match="command not found"):
        await make_shell(ShellConfig(allow=["no-such-program-here"]), shared_tmp).invoke(
            ctx(), {"command": "no-such-program-here"})


async def test_a_refusal_reaches_the_model(make_runtime: Any, shared_tmp: Path) -> None:
    tool = shell(shared_tmp, allow=["ls"])
    async with make_runtime([call("ls && id"), {"text": "ok"}], [tool]) as (rt, _):
        await asyncio.wait_for(rt.send("t", "go"), 10)
        result = result_of(await rt.records.entries("t"))
    assert result.is_error
    assert result.content["error"]["type"] == "exception"
    assert "refused: '&' is shell syntax" in result.content["error"]["message"]


@pytest.mark.parametrize(("command", "found"), [
    ("ls -la", None),
    ("echo 'a;b|c&d>e<f(g)$h`i'", None),
    ('echo "a;b|c&d>e<f(g)"', None),
    ("echo a\\;b\\|c\\$d", None),
    ("a;b", ";"), ("a&&b", "&"), ("a|b", "|"), ("a>b", ">"), ("a<b", "<"), ("(a)", "("),
    ("a $b", "$"), ("a `b`", "`"), ("a\nb", "\n"),
    ('a "$b"', "$"), ('a "`b`"', "`"), ('a "\\$b"', None),
    ("a 'b' ; c", ";"), ("a 'it\\'s;'", ";"),  # in single quotes a backslash is plain
])
def test_shell_syntax_is_found_outside_quotes(command: str, found: str | None) -> None:
    assert _shell_syntax(command) == found


# -- output, timeout, cancellation -----------------------------------------------------------


async def test_output_is_capped_per_stream(shared_tmp: Path) -> None:
    tool = shell(shared_tmp, max_output_bytes=100)
    # 10 MB through a 100-byte cap: the rest is read and dropped, so the command never
    # blocks on a full pipe.
    out = await asyncio.wait_for(tool.invoke(ctx(), {"command": (
        "head -c 10000000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero | tr '\\0' b >&2")}), 30)
    assert out == {"exit_code": 0, "stdout": "a" * 100, "stderr": "b" * 50, "truncated": True,
                   "timed_out": False}


TREE = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; echo started; "
# The pids a command writes are the host's only outside bubblewrap (inside, it has a PID
# namespace of its own): the tree tests that read them run with sandbox = "off", and
# test_bwrap_cancellation_kills_the_whole_tree finds the tree from outside instead.


async def test_a_timeout_kills_the_whole_tree(make_runtime: Any, shared_tmp: Path) -> None:
    tool = shell(shared_tmp, timeout_s=2, sandbox="off")
    script = [call(TREE + "sleep 300"), {"text": "done"}]
    async with make_runtime(script, [tool]) as (rt, _):
        run = await asyncio.wait_for(rt.send("t", "go"), 30)
        result = result_of(await rt.records.entries("t"))
    assert run.state is S.COMPLETED
    # The tool answers itself, with what came before the timeout.
    assert not result.is_error
    assert result.content["timed_out"] is True
    assert result.content["exit_code"] == -15  # the shell ended by the SIGTERM
    assert result.content["stdout"] == "started\n"
    shell_pid = await pid_in(shared_tmp / "shell.pid")
    child_pid = await pid_in(shared_tmp / "child.pid")
    with pytest.raises(ProcessLookupError):
        os.kill(shell_pid, 0)  # ended and reaped
    assert await gone(child_pid)


@pytest.mark.parametrize(("trap", "grace_s"), [
    # SIGTERM honoured: the shell's trap runs (and the grace is not waited out).
    ("trap 'echo term > got-term; exit 0' TERM; ", 30.0),
    # SIGTERM ignored, by the shell and (inherited) its children: SIGKILL after the grace.
    ("trap '' TERM; ", 0.3),
])
async def test_cancelling_the_run_kills_the_whole_tree(
        shared_tmp: Path, trap: str, grace_s: float) -> None:
    script = [call(trap + TREE + "sleep 300"), {"text": "next"}]
    tools = [shell(shared_tmp, sandbox="off")]
    async with runtime_with_grace(shared_tmp, script, tools, grace_s) as rt:
        run = await rt.submit("t", "go")
        shell_pid = await pid_in(shared_tmp / "shell.pid")
        child_pid = await pid_in(shared_tmp / "child.pid")
        # Both sleeps exec'd: a SIGTERM between a fork and its exec would run the shell's
        # trap in the child instead, and that sleep would outlive the grace.
        if sys.platform == "linux":
            await until(lambda: running_in_group(os.getpgid(shell_pid), b"sleep\0") == 2)
        ended = await asyncio.wait_for(rt.cancel(run.id), 20)
        result = result_of(await rt.records.entries("t"))
    assert ended.state is S.CANCELLED
    assert result.content["error"]["type"] == "cancelled"
    with pytest.raises(ProcessLookupError):
        os.kill(shell_pid, 0)
    assert await gone(child_pid)
    assert (shared_tmp / "got-term").exists() == (grace_s > 1)


async def test_a_command_sees_only_the_passed_environment(
        shared_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's secrets are not in a command's environment: only ``pass_env``."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("MAIDEN_TEST_VISIBLE", "yes")
    shell = make_shell(ShellConfig(requires_approval=False,
                                   pass_env=["PATH", "MAIDEN_TEST_VISIBLE"]), shared_tmp)
    ctx = ToolContext(run_id="r", thread_id="t", tool_call_id="c", idempotency_key="k")
    result = await shell.invoke(ctx, {"command": "env"})
    seen = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert seen.get("MAIDEN_TEST_VISIBLE") == "yes"
    assert "ANTHROPIC_API_KEY" not in seen
