"""Every round on disk, through real `maiden` processes killed with SIGKILL (DESIGN §3).

A model server that speaks the OpenAI wire (``tests/fakes/openai.py``) answers `maiden`;
the tools are a module beside ``agent.toml`` that counts its calls in a file. What is
checked is what a person sees: how often a tool ran, what `maiden runs` and `maiden show`
say, and what the model was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.fakes.openai import OpenAIServer, completion, stream
from tests.fakes.server import Reply

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TIMEOUT_S = 60

TOOLS = '''
import os
import signal
from pathlib import Path

from runtime import tool


@tool(effect="read_only")
def read_note(name: str) -> str:
    """Read a note."""
    with Path("calls.log").open("a") as log:
        log.write(name + "\\n")
    if name == "poison":
        os.kill(os.getpid(), signal.SIGKILL)  # a tool that takes the process down, always
    return f"the note {name} says hello"
'''


class Model(OpenAIServer):
    """The OpenAI wire, answering from what it is sent: a message that asks for a note gets
    a call of ``read_note`` (then, once its result is in, the answer); any other message a
    plain answer. ``asked`` is set once it has been asked ``kill_at`` times; that request is
    then held unanswered (the test kills `maiden` there)."""

    def __init__(self, kill_at: int | None = None) -> None:
        super().__init__(api_key=None)
        self.kill_at = kill_at
        self.asked = asyncio.Event()

    def validate(self, headers: dict[str, str], body: Any) -> Reply | None:
        refused = super().validate(headers, body)
        if refused is not None:
            return refused
        if len(self.requests) == self.kill_at:
            self.asked.set()
            return Reply(wait=asyncio.Event())  # never answered: maiden dies waiting
        streamed = bool(body.get("stream"))
        last = body["messages"][-1]
        said = str(last.get("content") or "")
        if last["role"] == "user" and "read_note:" in said:
            call = (f"call_{len(self.requests)}", "read_note",
                    json.dumps({"name": said.rsplit("read_note:", 1)[1].split()[0]}))
            return stream(calls=[(call[0], call[1], [call[2]])]) if streamed \
                else completion(calls=[call])
        text = f"noted: {said}" if last["role"] == "tool" else f"you said: {said}"
        return stream([text]) if streamed else completion(text)


def _home(tmp_path: Path, server: Model) -> Path:
    (tmp_path / "note_tools.py").write_text(TOOLS)
    (tmp_path / "agent.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodel = "m"\n'
        '[tools]\nmodules = ["note_tools"]\n[http]\nenabled = false\n')
    return tmp_path


async def _maiden(home: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home, env=ENV,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _killed_when_asked(home: Path, server: Model, *args: str) -> None:
    """`maiden ARGS`, SIGKILLed once the model is asked its ``kill_at``-th time."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home, env=ENV,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        await asyncio.wait_for(server.asked.wait(), TIMEOUT_S)
    finally:
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), TIMEOUT_S)


async def _restart(home: Path) -> tuple[int, str]:
    """`maiden run` until its Ready line (recovery is done by then), then SIGTERM; or until
    it dies on its own. Its exit code and what it printed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", cwd=home, env=ENV,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    lines = []
    async with asyncio.timeout(TIMEOUT_S):
        async for raw in proc.stdout:
            lines.append(raw.decode())
            if lines[-1].startswith("Ready."):
                proc.send_signal(signal.SIGTERM)
        code = await proc.wait()
    return code, "".join(lines)


def _calls(home: Path) -> list[str]:
    log = home / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


async def test_a_finished_read_only_call_is_not_run_again_after_kill_9(tmp_path: Path) -> None:
    """Killed as the model is asked for its next turn, the read-only call's result already
    given to it: the restart answers from the recorded result; the tool ran once, and
    `maiden runs` shows the run was recovered, and why."""
    async with Model(kill_at=2) as server:
        home = _home(tmp_path, server)
        await _killed_when_asked(home, server, "send", "t", "go read_note:a")
        assert _calls(home) == ["a"]
        server.kill_at = None
        code, banner = await _restart(home)
        assert code == 0, banner
        assert "recovered   1 unfinished run(s)" in banner
    assert _calls(home) == ["a"], "the read-only call ran again after the restart"
    code, shown, _ = await _maiden(home, "show", "t")
    assert code == 0 and "noted: the note a says hello" in shown
    code, runs, _ = await _maiden(home, "runs")
    assert code == 0
    assert "recovered after crash x1" in runs
    assert "recovered after crash (attempt 1): its process died with the run running" in runs, \
        runs


async def test_a_poison_run_leaves_its_thread_usable(tmp_path: Path) -> None:
    """A tool that kills every process: the run ends ``poison_run`` with its message in the
    thread, closed; the next message is a turn of its own, answered as usual."""
    async with Model() as server:
        home = _home(tmp_path, server)
        code, _, err = await _maiden(home, "send", "t", "go read_note:poison")
        assert code == -signal.SIGKILL, err
        for _ in range(8):  # each restart recovers the run and dies in its tool, until
            code, banner = await _restart(home)  # the run is given up as poison
            if code == 0:
                break
            assert code == -signal.SIGKILL, banner
        assert code == 0, "maiden kept dying"
        code, runs, _ = await _maiden(home, "runs")
        assert "poison_run" in runs
        code, out, err = await _maiden(home, "send", "t", "after poison")
        assert code == 0, err
        assert out == "you said: after poison\n"
        sent = server.requests[-1].json["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users == ["go read_note:poison", "after poison"], sent
    assert [m["role"] for m in sent if m["role"] != "system"] == [
        "user", "assistant", "tool", "assistant", "user"]
    code, shown, _ = await _maiden(home, "show", "t")
    assert "go read_note:poison" in shown and "poison_run" in shown
