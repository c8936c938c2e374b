"""`maiden run` started while its SQLite store's disk is full waits for room (``[store]
open_wait_s``), one warning line a try, and serves once there is some, as it waits for a
PostgreSQL server out of reach (tests/processes/test_postgres_at_start.py); a one-shot
command says the disk is full, at once. Found by the chaos soak's ``disk_full`` (seed 7,
SQLite): a replica restarted on a full disk exited 2 at once, a "configuration error",
``disk I/O error`` (SQLite's word for a ``-shm`` file it had no room to make).

The disk is a 2 MB tmpfs in a mount namespace of the server's own, filled by ``dd``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.http_helpers import banner_url
from tests.processes.test_cli import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _full_disk_then(home: Path, command: str) -> list[str]:
    """``sh -c`` in a mount namespace of its own: the store made on a small tmpfs at
    ``data``, the disk filled, then ``command`` (exec'd: the process keeps the pid)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed: cannot mount a small disk")
    (home / "data").mkdir()
    python = sys.executable
    script = (f'mount -t tmpfs -o size=2m tmpfs "{home / "data"}" || exit 97; '
              f'"{python}" -m bot send t one >/dev/null || exit 98; '
              'dd if=/dev/zero of=data/filler bs=64k 2>/dev/null; '
              f'exec "{python}" -m bot {command}')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def test_maiden_run_on_a_full_disk_waits_for_room_then_serves(home: Path) -> None:
    proc = subprocess.Popen(_full_disk_then(home, "run"), cwd=home, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    err: list[str] = []
    waiting = threading.Event()  # set once it says it waits (or has ended)

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "has no room to open" in line:
                waiting.set()
        waiting.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        if not waiting.wait(30) or not any("has no room to open" in line for line in err):
            proc.kill()
            proc.wait()
            if proc.returncode == 97:
                pytest.skip(f"cannot mount a tmpfs here: {''.join(err)[-200:]}")
            pytest.fail(f"no wait for room (exit {proc.returncode}): {''.join(err)[-600:]}")
        filler = Path(f"/proc/{proc.pid}/root") / str(home / "data").lstrip("/") / "filler"
        filler.unlink()
        url = banner_url(proc.stdout)
        assert url, "".join(err)[-600:]
        with httpx.Client(base_url=url, timeout=10) as client:
            answer = client.post("/v1/threads/t/messages", json={"text": "two"})
            assert answer.status_code == 200 and answer.json()["reply"] == "echo: two"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        reader.join(10)
        proc.stderr.close()
    said = "".join(err)
    assert "no room on the disk for its -shm file" in said, said
    assert "Traceback" not in said and "configuration error" not in said, said


def test_a_one_shot_command_on_a_full_disk_says_so_at_once(home: Path) -> None:
    done = subprocess.run(_full_disk_then(home, "send t two"), cwd=home, env=ENV, text=True,
                          capture_output=True, timeout=60)
    if done.returncode == 97:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 2, done.stderr
    assert "the disk" in done.stderr and "has no room" not in done.stderr, done.stderr
