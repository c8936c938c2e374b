"""`maiden run` with Slack or Discord down at start, as real processes against the fakes.

"Down" is a loopback port nothing listens on (every connection refused); "up" is the fake
started on that very port later. Meanwhile maiden serves the rest (HTTP, schedules), says
"connecting: <reason>" in its banner and /healthz, and keeps a reply for the channel in the
outbox; once the fake accepts, the channel connects (one log line) and the reply goes out.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord, World
from tests.fakes.discord.routes import PREFIX
from tests.fakes.site import free_port
from tests.fakes.slack import BOT_USER, FakeSlack, Workspace

ROOT = Path(__file__).resolve().parents[2]
C = "C0GENERAL01"


class Lines:
    """A process's stream read line by line as it comes; ``wait_for`` a line holding text."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            async with self._changed:
                self.lines.append(line.decode())
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("")  # end of the stream
            self._changed.notify_all()

    async def wait_for(self, text: str, count: int = 1) -> str:
        """The ``count``-th line holding ``text``."""
        def found() -> list[str]:
            return [line for line in self.lines if text in line]

        async with asyncio.timeout(30), self._changed:
            await self._changed.wait_for(lambda: len(found()) >= count or "" in self.lines)
        lines = found()
        assert len(lines) >= count, f"{text!r} never came {count}x:\n{''.join(self.lines)}"
        return lines[count - 1]

    def text(self) -> str:
        return "".join(self.lines)


@asynccontextmanager
async def maiden_run(home: Path, environ: dict[str, str]) -> AsyncIterator[
        tuple[asyncio.subprocess.Process, Lines, Lines]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", cwd=home, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        yield proc, out, err
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        await asyncio.gather(out._task, err._task, return_exceptions=True)


def agent_toml(home: Path, section: str, deliver: str) -> None:
    (home / "agent.toml").write_text(
        (ROOT / "agent.toml").read_text() + "\n[http]\nport = 0\n\n" + section
        + '\n[[schedules]]\nname = "report"\ncron = "0 0 1 1 *"\nprompt = "the report"\n'
        f'deliver = "{deliver}"\n')


async def serving_while_down(out: Lines, name: str, api_url: str) -> str:
    """Read the banner (the channel connecting) and check the rest serves: /healthz and the
    console say why the channel is not up, a message over HTTP is answered, and the
    schedule's run ends with its answer for the channel in the outbox. The HTTP API's URL."""
    await out.wait_for("Ctrl-C stops.")
    banner = out.text()
    assert f"{name:<11} connecting: cannot reach {api_url}: connection refused " in banner
    found = re.search(r"over HTTP at (http://\S+), ", banner)
    assert found is not None, banner
    url = found.group(1)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        health = (await client.get("/healthz")).json()
        assert health["status"] == "ok", health
        assert health["channels"][name] == f"connecting: cannot reach {api_url}: " \
            "connection refused"
        now = await client.get("/")  # the console's Now page
        assert f"<strong>{name}</strong> connecting: cannot reach {api_url}: connection " \
            "refused" in now.text, now.text
        answer = await client.post("/v1/threads/t1/messages", json={"text": "hi over http"})
        assert answer.json()["reply"] == "echo: hi over http"
        run = (await client.post("/v1/schedules/report/run", params={"wait": "true"})).json()
        assert run["state"] == "completed", run
    return url


async def connected(err: Lines, name: str, url: str, ok: Callable[[str], bool]) -> None:
    """The channel's one "connected" log line, and /healthz agreeing."""
    await err.wait_for(f"{name}: connected: ")
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        status = (await client.get("/healthz")).json()["channels"][name]
    assert ok(status), status


async def stopped(proc: asyncio.subprocess.Process, err: Lines) -> None:
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 30) == 0, err.text()


async def test_slack_down_at_start_is_waited_for_while_the_rest_serves(home: Path) -> None:
    port, workspace = free_port(), Workspace()
    api_url = f"http://127.0.0.1:{port}/api/"
    agent_toml(home, f'[channels.slack]\napi_url = "{api_url}"\nallow_users = ["U1"]\n'
               "reconnect_max_s = 1\n", f"slack:{C}")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": workspace.bot_token,
               "SLACK_APP_TOKEN": workspace.app_token}
    async with maiden_run(home, environ) as (proc, out, err):
        url = await serving_while_down(out, "slack", api_url)
        async with FakeSlack(workspace, port=port) as fake:
            await connected(err, "slack", url, lambda s: s.startswith("connected (Socket Mode"))
            (report,) = await fake.wait_messages(C, 1, timeout=30)  # from the outbox
            assert report["text"] == "echo: the report"
            event = fake.user_event(C, "U1", f"<@{BOT_USER}> hi from slack", mention=True)
            await fake.acked(await fake.socket_event(event), timeout=30)
            replies = await fake.wait_messages(C, 3, timeout=30)
            assert replies[-1]["text"] == "echo: hi from slack"
            await stopped(proc, err)
    assert sum("slack: connected: " in line for line in err.lines) == 1
    assert "Traceback" not in err.text()
    assert "will be unused" not in err.text()  # bolt's note on the token it reads itself


async def test_discord_down_at_start_is_waited_for_while_the_rest_serves(home: Path) -> None:
    port = free_port()
    api_url = f"http://127.0.0.1:{port}{PREFIX}"
    agent_toml(home, f'[channels.discord]\napi_url = "{api_url}"\n'
               f'allow_users = ["{HUMAN_ID}"]\nreconnect_max_s = 1\n', f"discord:{GENERAL_ID}")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "DISCORD_BOT_TOKEN": World().token}
    async with maiden_run(home, environ) as (proc, out, err):
        url = await serving_while_down(out, "discord", api_url)
        await err.wait_for("discord: cannot reach", count=3)  # a few attempts failed
        async with FakeDiscord(port=port) as fake:
            await connected(err, "discord", url, lambda s: s.startswith("connected as maiden"))
            (report,) = await fake.wait_messages(GENERAL_ID, 1, timeout=30)  # from the outbox
            assert report["content"] == "echo: the report"
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi from discord",
                                    mentions=[BOT_ID])
            replies = await fake.wait_messages(GENERAL_ID, 3, timeout=30)
            assert replies[-1]["content"] == "echo: hi from discord"
            await stopped(proc, err)
    assert sum("discord: connected: " in line for line in err.lines) == 1
    assert "Traceback" not in err.text()
    assert "PyNaCl" not in err.text() and "davey" not in err.text()  # no voice, no warning
    assert "Unclosed client session" not in err.text()  # each failed login cleaned up

