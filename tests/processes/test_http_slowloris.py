"""The issue's scenario through a real `maiden run` started with 256 open files allowed:
300 half-sent requests are held, /healthz still answers, and the server closes them."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
HALF = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"

# One of the "heavy" group (pyproject addopts): run one at a time on one worker, so that
# no two of them starve each other of the two cores.
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX rlimits"),
              pytest.mark.xdist_group("heavy")]


def test_maiden_run_outlasts_300_half_sent_requests_at_256_open_files(home: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard open-files limit here is {hard}: nothing to raise it to")
    with (home / "agent.toml").open("a") as f:
        f.write("header_timeout_s = 2\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        ["/bin/sh", "-c", f'ulimit -Sn 256 && exec "{sys.executable}" -m bot run'],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        banner = ""
        for line in proc.stdout:
            banner += line
            if line.startswith("Ready."):
                break
        assert "Ready." in banner, banner
        url = banner.split("  http        ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1])
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(HALF)
            held.append(sock)
        assert httpx.get(url + "/healthz", timeout=30).status_code == 200
        for sock in held:  # the socket's timeout bounds the wait for the server's close
            assert sock.recv(1024).startswith(b"HTTP/1.1 408 ")
        assert httpx.get(url + "/healthz", timeout=30).status_code == 200
    finally:
        for sock in held:
            sock.close()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert "open files limit raised from 256 to " in err, err
