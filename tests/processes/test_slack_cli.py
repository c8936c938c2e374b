"""`maiden check` and `maiden run` with Slack configured, as real processes against the fake."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from tests.fakes.slack import BOT_USER, SCOPES, FakeSlack, Workspace, sign, signed_event

ROOT = Path(__file__).resolve().parents[2]
C = "C0GENERAL01"


def configure(home: Path, fake: FakeSlack, extra: str = "") -> None:
    """The default agent.toml, on any free port, with Slack pointed at ``fake``."""
    (home / "agent.toml").write_text(
        (ROOT / "agent.toml").read_text() + "\n[http]\nport = 0\n"
        f'\n[channels.slack]\napi_url = "{fake.api_url}"\nallow_users = ["U1"]\n{extra}')


def env(fake: FakeSlack, **more: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_APP_TOKEN": fake.app_token, **more}


async def maiden(home: Path, environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_check_verifies_the_token_and_the_scopes(home: Path) -> None:
    lacking = replace(Workspace(), scopes=tuple(s for s in SCOPES
                                                if s not in ("reactions:write", "files:read")))
    async with FakeSlack(lacking) as fake:
        configure(home, fake)
        code, out, _ = await maiden(home, env(fake), "check")
        assert "slack     mode socket" in out and "2 access rules" in out
        assert "  rights    slack:\n              talk, approve, operate: U1 in every channel" \
            in out
        assert "workspace Maiden Test (T0FAKE0001)" in out
        assert "missing scopes (see channels/slack/manifest.json): reactions:write, " \
            "files:read" in out
        assert code == 1
        assert [c for c in fake.calls("auth.test")]  # asked the fake, not slack.com
    async with FakeSlack() as fake:
        configure(home, fake)
        code, out, _ = await maiden(home, env(fake), "check")
        assert code == 0 and "missing scopes" not in out
        bare = {k: v for k, v in env(fake).items() if not k.startswith("SLACK_")}
        code, out, _ = await maiden(home, bare, "check")
        assert code == 1 and "$SLACK_BOT_TOKEN: NOT SET" in out
        assert "$SLACK_APP_TOKEN: NOT SET" in out and "SIGNING" not in out


async def test_run_serves_slack_until_sigterm(home: Path) -> None:
    async with FakeSlack() as fake:
        configure(home, fake)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=home, env=env(fake),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        try:
            banner = ""
            while not banner.endswith("Ctrl-C stops.\n"):
                line = await asyncio.wait_for(proc.stdout.readline(), 60)
                assert line, banner
                banner += line.decode()
            assert f"slack       Socket Mode, workspace Maiden Test (T0FAKE0001) as " \
                   f"<@{BOT_USER}>; 2 access rules" in banner
            assert "talk, approve, operate: U1 in a DM with the bot" in banner
            event = fake.user_event(C, "U1", f"<@{BOT_USER}> hi from slack", mention=True)
            await fake.acked(await fake.socket_event(event), timeout=30)
            (_, reply) = await fake.wait_messages(C, 2, timeout=30)
            assert reply["text"] == "echo: hi from slack"
            assert reply["thread_ts"] == event["event"]["ts"]
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0, err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_run_refuses_slack_without_its_tokens(home: Path) -> None:
    async with FakeSlack() as fake:
        configure(home, fake, 'mode = "http"\n')
        bare = {k: v for k, v in env(fake).items() if not k.startswith("SLACK_")}
        code, out, err = await maiden(home, bare, "run")
        assert code == 2 and "Ready" not in out
        assert "channels.slack.bot_token_env: $SLACK_BOT_TOKEN is not set" in err
        assert "channels.slack.signing_secret_env: $SLACK_SIGNING_SECRET is not set" in err
        assert not (home / "data").exists()  # refused before the store was touched


async def test_run_in_http_mode_answers_junk_and_too_long_messages(home: Path) -> None:
    """Seen on `maiden run`: a signed body that is not JSON was a 500 with a traceback, and a
    too long message a 500 for each of Slack's four tries, with nobody told."""
    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    async with FakeSlack() as fake:
        configure(home, fake, 'mode = "http"\n')
        text = (home / "agent.toml").read_text()
        (home / "agent.toml").write_text(text.replace("[agent]\n",
                                                      "[agent]\nmax_message_chars = 20\n", 1))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run", cwd=home,
            env=env(fake, SLACK_SIGNING_SECRET=secret),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        try:
            url = ""
            while True:
                line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                assert line, "the banner ended early"
                if line.startswith("  http "):
                    url = line.split()[1]
                if line.startswith("Ready."):
                    break
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                junk = b"{not json"
                stamp = int(time.time())
                headers = {"Content-Type": "application/json",
                           "X-Slack-Request-Timestamp": str(stamp),
                           "X-Slack-Signature": sign(junk, secret, stamp)}
                answer = await client.post("/slack/events", content=junk, headers=headers)
                assert answer.status_code == 400
                event = fake.user_event(C, "U1", f"<@{BOT_USER}> {'x' * 50}", mention=True)
                for retry in (None, 1, 2, 3):
                    body, signed = signed_event(event, secret, retry_num=retry)
                    taken = await client.post("/slack/events", content=body, headers=signed)
                    assert taken.status_code == 200
            (_, reply) = await fake.wait_messages(C, 2, timeout=30)
            assert reply["text"] == ("Your message is too long: it has 50 characters and the "
                                     "limit is 20. Please shorten it or send it in parts.")
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0, err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    log = err.decode()
    assert "Traceback" not in log
    assert len([line for line in log.splitlines() if "is not JSON" in line]) == 1
    assert len([m for m in fake.messages(C) if m.get("user") == BOT_USER]) == 1
