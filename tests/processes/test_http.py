"""`maiden run` as a real process: HTTP intake, SIGTERM mid-run, restart, structured logs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-" + "7" * 32

SLOW_UNTIL_RELEASED = '''
import asyncio
from pathlib import Path
from runtime import tool

@tool(timeout_s=300)
async def slow() -> str:
    """Take long, unless released."""
    if Path("release").exists():
        return "released"
    await asyncio.sleep(300)
    return "never"
'''


@pytest.fixture
def home(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "agent.toml", tmp_path / "agent.toml")
    (tmp_path / "slow_tools.py").write_text(SLOW_UNTIL_RELEASED)
    text = (tmp_path / "agent.toml").read_text()
    text = text.replace('modules = []', 'modules = ["slow_tools"]')
    text = text.replace('concurrency = "global"',
                        'concurrency = "global"\nshutdown_grace_s = 0.5\npoll_interval_s = 0.1')
    (tmp_path / "agent.toml").write_text(
        text + '\n[http]\nport = 0\ntoken_env = "MAIDEN_TEST_HTTP_TOKEN"\n')
    return tmp_path


class Server:
    """`maiden --log-format json run`, started until its banner's Ready line."""

    def __init__(self, home: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_TEST_HTTP_TOKEN": TOKEN}
        self.stderr = log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "--log-format", "json", "run"], cwd=home, env=env,
            stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        assert self.proc.stdout is not None
        lines = []
        for line in self.proc.stdout:
            lines.append(line)
            if line.startswith("Ready."):
                break
        self.banner = "".join(lines)
        assert self.banner.endswith("Ctrl-C stops.\n"), self.banner
        http = next(line for line in lines if line.startswith("  http "))
        self.url = http.split()[1]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20,
                            headers={"Authorization": f"Bearer {TOKEN}"})

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.stderr.close()


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = "message"
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


def test_sigterm_mid_run_then_restart_finishes_it(home: Path) -> None:
    log = home / "maiden.log"
    first = Server(home, log)
    try:
        assert "(bearer token from $MAIDEN_TEST_HTTP_TOKEN; console http://127.0.0.1:" \
            in first.banner
        with first.client() as client:
            assert client.get("/v1/threads", headers={"Authorization": ""}).status_code == 401
            with client.stream("POST", "/v1/threads/job/messages", json={"text": "/tool slow"},
                               headers={"Accept": "text/event-stream"}) as response:
                stream = events(response)
                for kind, data in stream:
                    if kind == "tool.call":
                        run_id = data["run_id"]
                        break
                # The tool is running: stop the process under it.
                first.proc.send_signal(signal.SIGTERM)
                rest = list(stream)
        assert first.proc.wait(timeout=30) == 0
    finally:
        first.close()
    assert rest[-1][0] == "run.paused" and rest[-1][1]["state"] == "awaiting_tool"

    (home / "release").write_text("")
    second = Server(home, log)
    try:
        assert "recovered   1 unfinished run(s)" in second.banner
        assert f"{run_id} on 'job': completed (answered)" in second.banner
        with second.client() as client:
            run = client.get(f"/v1/runs/{run_id}").json()
            assert run["state"] == "completed" and run["reply"] == 'slow returned "released"'
            # A clean stop released the run: carrying it on is not a crash recovery.
            assert run["recovery_attempts"] == 0
            thread = client.get("/v1/threads/job").json()
            assert [e["kind"] for e in thread["entries"]["items"]] == [
                "user", "assistant", "tool_result", "assistant"]
            assert client.post("/v1/threads/job/messages", json={"text": "still here?"}
                               ).json()["reply"] == "echo: still here?"
        assert second.stop() == 0
    finally:
        second.close()

    records = [json.loads(line) for line in log.read_text().splitlines()]  # all JSON
    assert TOKEN not in log.read_text()
    mine = [r for r in records if r.get("run_id") == run_id]
    messages = [r["message"] for r in mine]
    for expected in ("message accepted as run", "run started", "tool slow called",
                     "run awaiting_tool: shutting down", "run completed: answered"):
        assert any(m.startswith(expected) for m in messages), (expected, messages)
    assert all(r["thread_id"] == "job" for r in mine)
    assert {"ts", "level", "logger", "message"} <= set(mine[0])


HELD_UNTIL_RELEASED = '''
import asyncio
from pathlib import Path
from runtime import tool

@tool(timeout_s=300)
async def slow() -> str:
    """Wait until released."""
    while not Path("release").exists():
        await asyncio.sleep(0.05)
    return "released"
'''


def test_a_long_recovery_goes_on_with_the_channels_open(home: Path) -> None:
    """chaos finding 14: a restart with unfinished runs that take long to finish opens its
    channels after ``recovery_before_ready_s`` (nothing acknowledged messages, ran slots
    or took Discord's messages for the whole recovery before); the new message waits for
    the global lock behind the recovered run, and recovery says what it came to when it
    ends."""
    log = home / "maiden.log"
    first = Server(home, log)
    try:
        with first.client() as client, client.stream(
                "POST", "/v1/threads/job/messages", json={"text": "/tool slow"},
                headers={"Accept": "text/event-stream"}) as response:
            for kind, data in events(response):
                if kind == "tool.call":
                    run_id = data["run_id"]
                    first.proc.send_signal(signal.SIGTERM)
                    break
        assert first.proc.wait(timeout=30) == 0
    finally:
        first.close()
    (home / "slow_tools.py").write_text(HELD_UNTIL_RELEASED)
    text = (home / "agent.toml").read_text()
    (home / "agent.toml").write_text(text.replace(
        "poll_interval_s = 0.1", "poll_interval_s = 0.1\nrecovery_before_ready_s = 0.2"))

    second = Server(home, log)
    try:
        assert "  recovering  1 of 1 unfinished run(s) still, in the background" \
            in second.banner
        with second.client() as client:
            taken = client.post("/v1/threads/fresh/messages", json={"text": "hi", "wait": False})
            assert taken.status_code == 202, taken.text
            fresh = taken.json()["run_id"]
            assert client.get(f"/v1/runs/{fresh}").json()["state"] == "queued"
            (home / "release").write_text("")
            assert second.proc.stdout is not None
            after = [next(second.proc.stdout) for _ in range(3)]
            assert after == [f"    1/1 {run_id}: completed\n",
                             "  recovered   1 unfinished run(s)\n",
                             f"    {run_id} on 'job': completed (answered)\n"], after
            # The thread's next message is answered after its first.
            done = client.post("/v1/threads/fresh/messages", json={"text": "and?"}).json()
            assert done["reply"] == "echo: and?"
            assert client.get(f"/v1/runs/{fresh}").json()["reply"] == "echo: hi"
        assert second.stop() == 0
    finally:
        second.close()


def test_refuses_to_listen_beyond_loopback_without_a_token(home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MAIDEN_TEST_HTTP_TOKEN", None)
    text = (home / "agent.toml").read_text().replace("port = 0", 'port = 0\nhost = "0.0.0.0"')
    (home / "agent.toml").write_text(text)
    refused = subprocess.run([sys.executable, "-m", "bot", "run"], cwd=home, env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "http.host: '0.0.0.0' is not a loopback address and $MAIDEN_TEST_HTTP_TOKEN is " \
           "not set" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (home / "data").exists()  # refused before opening anything


def test_other_commands_do_not_load_the_web_stack(home: Path) -> None:
    # Slack and Discord configured: `send` still loads none of their libraries.
    with (home / "agent.toml").open("a") as f:
        f.write('\n[channels.slack]\nallow_users = ["U1"]\n[channels.discord]\nopen = true\n')
    script = textwrap.dedent('''
        import sys
        from bot.cli import main
        code = main(["send", "t", "hi"])
        print(code, sorted(m for m in ("fastapi", "uvicorn", "starlette", "prometheus_client",
                                       "httpx", "slack_bolt", "slack_sdk", "discord",
                                       "aiohttp")
                           if m in sys.modules))
    ''')
    result = subprocess.run([sys.executable, "-c", script], cwd=home, capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.splitlines()[-1] == "0 []", result.stdout + result.stderr


def test_run_fires_schedules_and_serves_them(home: Path, tmp_path: Path) -> None:
    """The schedules in `maiden run`: listed in the banner with their next fire, served at
    /v1/schedules, run by hand over HTTP; SIGTERM still exits 0."""
    with (home / "agent.toml").open("a") as f:
        f.write('\n[[schedules]]\nname = "digest"\ncron = "30 7 * * mon-fri"\n'
                'timezone = "Asia/Kolkata"\nprompt = "the morning digest"\n')
    server = Server(home, tmp_path / "run.log")
    try:
        assert "  schedules   1\n    digest: next " in server.banner
        assert "+05:30 -> thread 'schedule:digest'" in server.banner
        assert "schedule_create" in server.banner  # the agent's schedule tools
        with server.client() as client:
            (listed,) = client.get("/v1/schedules").json()["schedules"]
            assert listed["name"] == "digest" and listed["last_slot"] is None
            assert listed["next_fires"][0].endswith("T07:30:00+05:30")
            ran = client.post("/v1/schedules/digest/run", params={"wait": "true"}).json()
            assert ran["reply"] == "echo: the morning digest"
    finally:
        code = server.stop()
    assert code == 0
