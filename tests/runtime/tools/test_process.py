"""Subprocesses for tools (runtime/tools/process.py): stdin fed or none, a timeout without a
session of its own, and nothing of the process group left running however ``run_process``
ends - the command done, cancelled while starting, or cancelled twice in its grace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.tools.process import _group_alive, run_process
from tests.runtime.tools.children import gone, pid_in, until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shells and signals")


async def test_run_process_stops_what_a_finished_command_left_behind(tmp_path: Path) -> None:
    # The background child lets go of the pipes, so the command is done when sh exits;
    # what it left running in its group is stopped then. It dies on SIGTERM, an orphan:
    # a zombie until pid 1 reaps it (if ever), which must not hold up the return until
    # the end of the grace period.
    result = await asyncio.wait_for(run_process(
        "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!", grace_s=60), 10)
    assert result.returncode == 0 and not result.timed_out
    assert await gone(int(result.stdout))


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "WNOWAIT"),
                    reason="Linux /proc and waitid(WNOWAIT)")
def test_a_group_of_zombies_is_not_alive() -> None:
    child = subprocess.Popen(["true"], start_new_session=True)
    try:
        # Exited, not reaped: a zombie, which kill() still finds.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        os.killpg(child.pid, 0)
        assert not _group_alive(child.pid)
    finally:
        child.wait()
    assert not _group_alive(child.pid)
    assert _group_alive(os.getpgid(0))


async def test_run_process_feeds_stdin_and_otherwise_gives_none(tmp_path: Path) -> None:
    fed = await asyncio.wait_for(run_process("cat", stdin="hello"), 10)
    assert (fed.returncode, fed.stdout) == (0, "hello")
    empty = await asyncio.wait_for(run_process("cat"), 10)  # never the terminal's input
    assert (empty.returncode, empty.stdout) == (0, "")


async def test_run_process_without_a_new_session_still_times_out(tmp_path: Path) -> None:
    result = await asyncio.wait_for(run_process(
        sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(300)",
        new_session=False, timeout_s=1, grace_s=5), 20)
    assert result.timed_out and result.stdout == "up\n" and result.returncode == -15


async def test_a_second_cancellation_cuts_the_grace_short(tmp_path: Path) -> None:
    # The loop's own timeout for a tool, coming while the tool is already stopping its
    # command: no waiting out the rest of the grace period.
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: open('got-term', 'w').close())\n"
        "open('pid', 'w').write(f'{os.getpid()}\\n')\n"
        "while True:\n"
        "    time.sleep(60)\n")
    task = asyncio.create_task(run_process(sys.executable, str(script), cwd=str(tmp_path),
                                           grace_s=300))
    pid = await pid_in(tmp_path / "pid")
    task.cancel()
    await until(lambda: (tmp_path / "got-term").exists())
    assert not task.done()  # in the grace period
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def block_until(path: Path) -> None:
    """Wait for ``path`` *without* yielding to the event loop (bounded)."""
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def my_child_with(marker: str) -> bool:
    """Whether this process has forked a child with ``marker`` among its arguments."""
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_bytes()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2:].split()[1]) == os.getpid() \
                and marker.encode() in argv:
            return True
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")
async def test_a_cancellation_while_starting_still_stops_the_tree(tmp_path: Path) -> None:
    task = asyncio.create_task(run_process(
        "sh", "-c", "sleep 300 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; wait",
        str(tmp_path), cwd=str(tmp_path)))
    # One loop step at a time until the child is forked: its pipes are not connected yet.
    async with asyncio.timeout(10):
        while not my_child_with(str(tmp_path)):  # noqa: ASYNC110
            await asyncio.sleep(0)
    # The loop stands still, so the cancellation lands there, with a grandchild running.
    block_until(tmp_path / "child.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert await gone(await pid_in(tmp_path / "child.pid"))
