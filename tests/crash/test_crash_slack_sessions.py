"""A Slack thread's agent session across a process that stops driving its run (chaos
finding 2, ``slack-session-left-processing``): a real `maiden run` on Slack (the fake, over
Socket Mode) and a model on the OpenAI wire. The process that took the message shows the
session ``processing`` (or ``suspended``, waiting for an approval) and is then SIGKILLed
or stopped (SIGTERM) before the run ends; the next `maiden run` on the same store finishes
the run. The session must end ``active`` (answered), never be left as the first process
left it: the status is set where the run goes on and ends, from what the store says.

Replies are posted whole (``stream = "off"``): a streamed reply's ``chat.stopStream`` moves
the session too (Slack's default ``session_status`` is ``active``), which would hide the
loss on that one path (tests/channels/slack/test_sessions.py covers streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from channels.slack.render import APPROVE
from tests.fakes.openai import OpenAIServer, completion, stream
from tests.fakes.server import Reply
from tests.fakes.slack import BOT_USER, FakeSlack, block_actions_payload

pytestmark = pytest.mark.xdist_group("crash_slack_sessions")

ROOT = Path(__file__).resolve().parents[2]
C = "C0GENERAL01"
TIMEOUT_S = 30

TOOLS = '''
import asyncio
import socket
from pathlib import Path

from runtime import tool


@tool(effect="read_only")
async def slow(what: str) -> str:
    """Look something up (slowly the first time)."""
    log = Path("calls.log")
    first = not log.exists()
    with log.open("a") as calls:
        calls.write(what + "\\n")
    if first:  # the test stops this process meanwhile
        socket.create_connection(("127.0.0.1", int(Path("started.port").read_text()))).close()
        await asyncio.sleep(60)
    return f"{what}: found"


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"
'''


class Model(OpenAIServer):
    """``slow:WHAT`` / ``deploy:ENV`` in a message: a call of that tool; a tool result: the
    answer, which names it."""

    def __init__(self) -> None:
        super().__init__(api_key=None)

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        refused = super().validate(headers, body)
        if refused is not None:
            return refused
        streamed, last = bool(body.get("stream")), body["messages"][-1]
        said = str(last.get("content") or "")
        if last["role"] == "user":
            for name, key in (("slow", "what"), ("deploy", "env")):
                if f"{name}:" in said:
                    value = said.rsplit(f"{name}:", 1)[1].split()[0]
                    call = ("call_1", name, json.dumps({key: value}))
                    return stream(calls=[(call[0], call[1], [call[2]])]) if streamed \
                        else completion(calls=[call])
        text = f"answer: {said}" if last["role"] == "tool" else "hi"
        return stream([text]) if streamed else completion(text)


def _home(home: Path, model: Model, fake: FakeSlack) -> None:
    (home / "session_tools.py").write_text(TOOLS)
    (home / "agent.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{model.base_url}"\nmodel = "m"\n'
        '[tools]\nmodules = ["session_tools"]\n[http]\nenabled = false\n'
        '[runtime]\nshutdown_grace_s = 1\nlease_ttl_s = 3\n'
        f'[channels.slack]\napi_url = "{fake.api_url}"\nallow_users = ["U1"]\n'
        'approvers = ["U1"]\nstream = "off"\n')


def _log(home: Path, n: int) -> BinaryIO:
    return (home / f"maiden-{n}.log").open("wb")


async def _maiden(home: Path, fake: FakeSlack, n: int) -> asyncio.subprocess.Process:
    """The ``n``-th `maiden run` in ``home``, its log in ``home/maiden-N.log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": fake.bot_token,
           "SLACK_APP_TOKEN": fake.app_token}
    with _log(home, n) as log:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=home, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=log)


async def _stop(proc: asyncio.subprocess.Process, how: signal.Signals) -> None:
    if proc.returncode is None:
        proc.send_signal(how)
    await asyncio.wait_for(proc.wait(), TIMEOUT_S)


async def _listen(home: Path, started: asyncio.Event) -> asyncio.Server:
    """Where the tool says it has begun."""
    async def connected(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started.set()
        writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    (home / "started.port").write_text(str(server.sockets[0].getsockname()[1]))
    return server


def statuses(fake: FakeSlack, root: str) -> list[str]:
    """Every status the thread's session took, in order ([] while it has none)."""
    session = fake.sessions().get((C, root))
    return list(session["statuses"]) if session else []


def status(fake: FakeSlack, root: str) -> str | None:
    shown = statuses(fake, root)
    return shown[-1] if shown else None


def bot_messages(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    return [m for m in fake.messages(C) if m.get("user") == BOT_USER
            and m.get("thread_ts") == root]


def answers(fake: FakeSlack, root: str) -> list[str]:
    return [m["text"] for m in bot_messages(fake, root) if m["text"].startswith("answer:")]


async def _mention(fake: FakeSlack, text: str) -> str:
    """U1 mentions the bot in a new thread of C, acked; the thread's ``ts``."""
    sent = fake.user_event(C, "U1", f"<@{BOT_USER}> {text}", mention=True)
    await fake.acked(await fake.socket_event(sent))
    return str(sent["event"]["ts"])


async def _answered_active(fake: FakeSlack, root: str, answer: str) -> None:
    await fake.until(lambda: answers(fake, root) == [answer], what=f"the answer {answer!r}")
    await fake.until(lambda: status(fake, root) == "active", what="the session active",
                     timeout=10)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
async def test_a_session_left_processing_by_a_stopped_process_ends_where_the_run_ends(
        tmp_path: Path, how: signal.Signals) -> None:
    started = asyncio.Event()
    async with Model() as model, FakeSlack(wait=TIMEOUT_S) as fake, \
            await _listen(tmp_path, started):
        _home(tmp_path, model, fake)
        first = await _maiden(tmp_path, fake, 1)
        try:
            await fake.wait_connected()
            root = await _mention(fake, "slow:invoices")
            await asyncio.wait_for(started.wait(), TIMEOUT_S)
            await fake.until(lambda: status(fake, root) == "processing",
                             what="the session processing")
        finally:
            await _stop(first, how)  # mid-call: the run is not over
        assert status(fake, root) == "processing" and not answers(fake, root)

        second = await _maiden(tmp_path, fake, 2)  # takes the run up and finishes it
        try:
            await _answered_active(fake, root, "answer: invoices: found")
        finally:
            await _stop(second, signal.SIGTERM)
        assert status(fake, root) == "active", statuses(fake, root)
        assert (tmp_path / "calls.log").read_text().splitlines() == ["invoices", "invoices"]


async def test_a_session_left_suspended_by_a_killed_process_ends_where_it_is_decided(
        tmp_path: Path) -> None:
    async with Model() as model, FakeSlack(wait=TIMEOUT_S) as fake:
        _home(tmp_path, model, fake)
        first = await _maiden(tmp_path, fake, 1)
        try:
            await fake.wait_connected()
            root = await _mention(fake, "deploy:prod")
            await fake.until(lambda: status(fake, root) == "suspended" and bool(
                bot_messages(fake, root)), what="the prompt posted, the session suspended")
        finally:
            await _stop(first, signal.SIGKILL)
        (prompt,) = bot_messages(fake, root)
        button = prompt["blocks"][1]["elements"][0]
        assert button["action_id"] == APPROVE

        second = await _maiden(tmp_path, fake, 2)  # U1 approves there; the run goes on there
        try:
            await fake.wait_connected(2)
            await fake.until(lambda: fake.socket.live == 1, what="the second process connected")
            click = block_actions_payload("U1", C, prompt["ts"], APPROVE, button["value"],
                                          block_id="maiden_approval", thread_ts=root,
                                          message=prompt)
            for _ in range(10):  # until the prompt's post is recorded (the restart finds it
                # in Slack), a click is answered "try again", as a person would
                await fake.acked(await fake.socket_interactive(click))
                with contextlib.suppress(TimeoutError):
                    await fake.until(lambda: bool(answers(fake, root)), timeout=2,
                                     what="the answer")
                    break
            await _answered_active(fake, root, "answer: deployed to prod")
        finally:
            await _stop(second, signal.SIGTERM)
        assert status(fake, root) == "active", statuses(fake, root)
        assert "processing" in statuses(fake, root)[statuses(fake, root).index("suspended"):]
