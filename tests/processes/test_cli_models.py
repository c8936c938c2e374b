"""`maiden chat` against a real-shaped model server: the CLI process streams its tokens."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.openai import OpenAIServer, stream

ROOT = Path(__file__).resolve().parents[2]


async def test_chat_streams_tokens_and_runs_tools_from_an_openai_compatible_server(
    tmp_path: Path,
) -> None:
    async with OpenAIServer(api_key=None) as server:  # a local server that needs no key
        server.queue(
            stream(["Bon", "jour", " !"]),
            stream(calls=[("call_1", "clock", ['{"tz": ', '"Europe/Paris"}'])]),
            stream(["Il est ", "midi."]),
        )
        (tmp_path / "agent.toml").write_text(
            f'[provider]\nkind = "openai"\nbase_url = "{server.base_url}"\n'
            'model = "local-model"\n[http]\nenabled = false\n')
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "chat", "--thread", "fr", cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(
            proc.communicate(b"Salut\nQuelle heure est-il ?\n/quit\n"), 60)
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert "bot> Bonjour !" in text
    assert '[tool] clock {"tz": "Europe/Paris"}' in text and "[tool] clock ok:" in text
    assert "bot> Il est midi." in text
    assert len(server.requests) == 3


async def test_send_and_usage_against_an_anthropic_shaped_server(tmp_path: Path) -> None:
    from tests.fakes.anthropic import AnthropicServer
    from tests.fakes.anthropic import stream as anthropic_stream

    async with AnthropicServer("sk-ant-cli-test") as server:
        server.queue(anthropic_stream(["Hello", " from Claude."], usage=(1200, 8, 1000, 0)))
        (tmp_path / "agent.toml").write_text(
            f'[provider]\nkind = "anthropic"\nbase_url = "{server.base_url}"\n'
            'model = "claude-sonnet-4-5"\napi_key_env = "MAIDEN_TEST_CLAUDE_KEY"\n'
            '[provider.prices]\ninput = 3.0\noutput = 15.0\ncache_write = 3.75\n'
            'cache_read = 0.3\n[http]\nenabled = false\n')
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MAIDEN_TEST_CLAUDE_KEY": "sk-ant-cli-test"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "send", "c", "hi", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert out.decode() == "Hello from Claude.\n"
        usage = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "usage", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        table, _ = await asyncio.wait_for(usage.communicate(), 60)
    row = next(line.split() for line in table.decode().splitlines() if line.startswith("c "))
    # 1200 input + 1000 cache writes (+ 8 output) tokens; $ = (1200*3 + 8*15 + 1000*3.75) / 1e6
    assert row[1:] == ["1", "1", "2200", "8", "0.0075"]
    assert "sk-ant-cli-test" not in err.decode()
