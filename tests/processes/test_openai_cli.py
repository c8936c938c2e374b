"""The OpenAI wire against a real `maiden run` process, with the real ``openai`` SDK (sync
and async): the offline echo model and a scripted one, a history that continues one
thread (seen by `maiden show`), and a stream cut by kill -9 then asked again with the
same Idempotency-Key: answered once, by one run."""

# mypy: disable-error-code="arg-type, list-item, call-overload"

from __future__ import annotations

import asyncio
import json
import signal
import threading
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.processes.test_cli import _serve, _stop, maiden

TOKEN = "openai-cli-token-0123456789"
pytestmark = pytest.mark.xdist_group("heavy")


def _url(banner: str) -> str:
    return banner.split("  http        ", 1)[1].split()[0] + "/v1"


def _configure(home: Path, monkeypatch: pytest.MonkeyPatch,
               script: list[dict[str, Any]] | None = None) -> None:
    text = (home / "agent.toml").read_text()
    if script is not None:
        (home / "script.json").write_text(json.dumps(script))
        text = text.replace('kind = "echo"', 'kind = "scripted"\nscript = "script.json"')
    text = text.replace("[http]\n", '[http]\ntoken_env = "MAIDEN_HTTP_TOKEN"\n')
    (home / "agent.toml").write_text(text)
    monkeypatch.setenv("MAIDEN_HTTP_TOKEN", TOKEN)  # for `maiden run` (it copies os.environ)


def test_the_sdks_against_maiden_run(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _configure(home, monkeypatch)
    server, banner = _serve(home)
    try:
        url = _url(banner)
        with openai.OpenAI(base_url=url, api_key=TOKEN, max_retries=0) as sdk:
            assert [m.id for m in sdk.models.list()] == ["maiden"]
            first = sdk.chat.completions.create(
                model="maiden", messages=[{"role": "user", "content": "one"}])
            answer = first.choices[0].message.content
            assert answer == "echo: one"
            stream = sdk.chat.completions.create(
                model="maiden", stream=True,
                messages=[{"role": "user", "content": "one"},
                          {"role": "assistant", "content": answer},
                          {"role": "user", "content": "two"}])
            assert "".join(c.choices[0].delta.content or "" for c in stream
                           if c.choices) == "echo: two"

        async def later() -> str:
            async with openai.AsyncOpenAI(base_url=url, api_key=TOKEN, max_retries=0) as sdk:
                done = await sdk.responses.create(model="maiden", input="three")
                return done.output_text
        assert asyncio.run(later()) == "echo: three"
    finally:
        _stop(server)
    threads = maiden(home, "threads").stdout
    chat = [line for line in threads.splitlines() if "runs=2" in line]
    assert len(chat) == 1, threads  # "one" and "two" on one thread
    thread = chat[0].split("'")[1]
    shown = maiden(home, "show", thread).stdout
    assert shown.count("user operator (run") == 2 and "echo: two" in shown


def test_a_stream_cut_by_a_kill_is_answered_once_after_the_restart(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = {"text": "one two three four five six", "chunks": 6, "chunk_delay_s": 0.4}
    _configure(home, monkeypatch, [slow, slow])
    server, banner = _serve(home)
    key = {"Idempotency-Key": "cut-1"}
    message: Any = [{"role": "user", "content": "count"}]
    got: list[str] = []
    started = threading.Event()
    try:
        with openai.OpenAI(base_url=_url(banner), api_key=TOKEN, max_retries=0) as sdk:
            def read() -> None:
                try:
                    for part in sdk.chat.completions.create(model="maiden", messages=message,
                                                            stream=True, extra_headers=key):
                        if part.choices and part.choices[0].delta.content:
                            got.append(part.choices[0].delta.content)
                            if len(got) == 2:  # 0.4 s in: the run's start is written
                                started.set()
                except openai.APIError:
                    pass  # the server died under it
            reader = threading.Thread(target=read)
            reader.start()
            assert started.wait(20)
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            reader.join(20)
    finally:
        if server.poll() is None:
            server.kill()
        if server.stdout:
            server.stdout.close()
    assert 0 < len(got) < 6  # cut in the middle
    server, banner = _serve(home)
    try:
        with openai.OpenAI(base_url=_url(banner), api_key=TOKEN, max_retries=0) as sdk:
            again = sdk.chat.completions.create(model="maiden", messages=message,
                                                extra_headers=key)
            assert again.choices[0].message.content == slow["text"]
            once_more = sdk.chat.completions.create(model="maiden", messages=message,
                                                    extra_headers=key)
            assert once_more.id == again.id
    finally:
        _stop(server)
    runs = maiden(home, "runs").stdout
    assert runs.count("completed") == 1, runs  # one run, recovered, answered once
    assert "recovered" in maiden(home, "show", again_thread(home)).stdout


def again_thread(home: Path) -> str:
    line = next(t for t in maiden(home, "threads").stdout.splitlines() if "runs=1" in t)
    return line.split("'")[1]


