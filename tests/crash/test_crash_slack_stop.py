"""Slack's stop button, and ``stop`` written in the thread, across kill -9 (issue 51): a real
`maiden run` on Slack (the fake, over Socket Mode) and a model on the OpenAI wire; a person
clicks stop (or writes ``stop``) while a tool runs, `maiden` acknowledges the event and is
SIGKILLed before the run is cancelled. After the restart the run ends cancelled, not
answered: the stop was written before the ack.

The tool sleeps in a worker thread, which a cancellation cannot cut short, so the run is
still not cancelled when the test kills `maiden` at the ack (the cancellation waits for
the tool up to ``cancel_grace_s``, set long here).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai import OpenAIServer, completion, stream
from tests.fakes.server import Reply
from tests.fakes.slack import BOT_USER, FakeSlack

pytestmark = pytest.mark.xdist_group("crash_slack_stop")

ROOT = Path(__file__).resolve().parents[2]
C = "C0GENERAL01"
TIMEOUT_S = 60

TOOLS = '''
import socket
import time
from pathlib import Path

from runtime import tool


@tool(effect="read_only")
def slow(what: str) -> str:
    """Look something up slowly."""
    with Path("calls.log").open("a") as log:
        log.write(what + "\\n")
    socket.create_connection(("127.0.0.1", int(Path("started.port").read_text()))).close()
    time.sleep(20)  # in a worker thread: a cancellation cannot cut it short
    return f"{what}: found"
'''


class Model(OpenAIServer):
    """A message with ``slow:WHAT`` gets a call of ``slow``; a tool result, an answer."""

    def __init__(self) -> None:
        super().__init__(api_key=None)

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        refused = super().validate(headers, body)
        if refused is not None:
            return refused
        streamed, last = bool(body.get("stream")), body["messages"][-1]
        said = str(last.get("content") or "")
        if last["role"] == "user" and "slow:" in said:
            call = ("call_1", "slow", json.dumps({"what": said.rsplit("slow:", 1)[1].split()[0]}))
            return stream(calls=[(call[0], call[1], [call[2]])]) if streamed \
                else completion(calls=[call])
        text = "the answer, which nobody should see" if last["role"] == "tool" else "hi"
        return stream([text]) if streamed else completion(text)


def _home(home: Path, model: Model, fake: FakeSlack) -> None:
    (home / "slow_tools.py").write_text(TOOLS)
    (home / "agent.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{model.base_url}"\nmodel = "m"\n'
        '[tools]\nmodules = ["slow_tools"]\n[http]\nenabled = false\n'
        '[runtime]\ncancel_grace_s = 30\n'
        f'[channels.slack]\napi_url = "{fake.api_url}"\nallow_users = ["U1"]\n')


def _env(fake: FakeSlack) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_APP_TOKEN": fake.app_token}


async def _listen(home: Path, started: asyncio.Event) -> asyncio.Server:
    """Where the tool says it has begun (it connects once it has written its call)."""
    async def connected(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started.set()
        writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    (home / "started.port").write_text(str(server.sockets[0].getsockname()[1]))
    return server


@pytest.mark.parametrize("how", ["button", "stop in the thread"])
async def test_a_stop_acknowledged_then_killed_cancels_the_run_after_the_restart(
        tmp_path: Path, how: str) -> None:
    started = asyncio.Event()
    async with Model() as model, FakeSlack(wait=TIMEOUT_S) as fake, \
            await _listen(tmp_path, started):
        _home(tmp_path, model, fake)
        first = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=tmp_path, env=_env(fake),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            await fake.wait_connected()
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> slow:invoices", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await asyncio.wait_for(started.wait(), TIMEOUT_S)
            root = sent["event"]["ts"]
            stop = {"type": "agent_session_stopped", "channel": C, "thread_ts": root,
                    "user": "U1", "streaming_message_ts": [], "event_ts": "1800000000.0001"}
            if how != "button":
                stop = fake.user_event(C, "U1", f"<@{BOT_USER}> stop", thread_ts=root,
                                       mention=True)
            await fake.acked(await fake.socket_event(stop))
        finally:
            first.send_signal(signal.SIGKILL)  # acknowledged; not cancelled yet
            await asyncio.wait_for(first.wait(), TIMEOUT_S)
        assert not [m for m in fake.messages(C) if m.get("user") == BOT_USER
                    and m["text"].startswith("Stopped")]
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=tmp_path, env=_env(fake),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            await fake.until(lambda: any(m.get("user") == BOT_USER
                                         and m["text"].startswith("Stopped")
                                         for m in fake.messages(C)), what="the Stopped line")
        finally:
            second.send_signal(signal.SIGTERM)
            await asyncio.wait_for(second.wait(), TIMEOUT_S)
        replies = [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER]
        assert replies == ["Stopped (cancelled by U1)."]
        assert (tmp_path / "calls.log").read_text().splitlines() == ["invoices"]  # once
        code = await (await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "runs", cwd=tmp_path, env=_env(fake),
            stdout=asyncio.subprocess.PIPE)).wait()
        assert code == 0
