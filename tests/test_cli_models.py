"""`maiden chat` against a real-shaped model server: the CLI process streams its tokens."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.openai import OpenAIServer, stream

ROOT = Path(__file__).resolve().parent.parent


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
