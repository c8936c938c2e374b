"""`maiden check` and `maiden run` with Discord configured, as real processes against the fake."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from runtime import SQLiteStore
from tests.fakes.discord import BOT_ID, GENERAL_ID, GUILD_ID, HUMAN_ID, FakeDiscord, World
from tests.processes.test_channels_down_at_boot import maiden_run

ROOT = Path(__file__).resolve().parents[2]


def configure(home: Path, fake: FakeDiscord) -> None:
    (home / "agent.toml").write_text(
        (ROOT / "agent.toml").read_text() + "\n[http]\nport = 0\n"
        f'\n[channels.discord]\napi_url = "{fake.api_url}"\nallow_users = ["{HUMAN_ID}"]\n')


def env(fake: FakeDiscord) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "DISCORD_BOT_TOKEN": fake.token}


async def maiden(home: Path, environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=home, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_check_verifies_the_token_intent_and_prints_the_invite(home: Path) -> None:
    async with FakeDiscord() as fake:
        configure(home, fake)
        code, out, _ = await maiden(home, env(fake), "check")
        assert code == 0, out
        assert "discord   api " in out and "bot maiden" in out
        assert "invite: https://discord.com/oauth2/authorize?client_id=" in out
        assert "&scope=bot+applications.commands&" in out
        with (home / "agent.toml").open("a") as f:
            f.write(f'allow_guilds = ["{GUILD_ID}"]\n')
        code, out, _ = await maiden(home, env(fake), "check")
        assert f"/maiden in guild {GUILD_ID}: not registered yet" in out, out
        fake.rest.commands[str(GUILD_ID)] = [{"name": "maiden", "id": "1"}]
        code, out, _ = await maiden(home, env(fake), "check")
        assert f"/maiden in guild {GUILD_ID}: registered" in out, out
        configure(home, fake)
        wrong = {**env(fake), "DISCORD_BOT_TOKEN": "not-the-token"}
        code, out, _ = await maiden(home, wrong, "check")
        assert code == 1 and "bot token refused" in out
    async with FakeDiscord(World(privileged=0)) as fake:
        configure(home, fake)
        code, out, _ = await maiden(home, env(fake), "check")
        assert code == 1 and "the message-content intent is off" in out


async def test_run_serves_discord_until_sigterm(home: Path) -> None:
    async with FakeDiscord() as fake:
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
            assert "discord     as maiden" in banner and "2 access rules" in banner
            assert f"    discord:\n                talk, approve, operate: {HUMAN_ID} in every" \
                in banner
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> hi from discord",
                                    mentions=[BOT_ID])
            (_, reply) = await fake.wait_messages(GENERAL_ID, 2, timeout=30)
            assert reply["content"] == "echo: hi from discord"
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0, err.decode()
            # maiden uses no voice: discord.py's warnings about voice's packages are noise.
            assert "PyNaCl" not in err.decode() and "davey" not in err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_run_stays_up_when_it_loses_the_gateway_lease(home: Path) -> None:
    """The store's gateway lease taken from `maiden run` (by a replica that found it dead):
    it closes its gateway connection and stands by instead of stopping, connects again once
    the lease is free, and answers (chaos/README.md, finding 5)."""
    toml = home / "agent.toml"
    async with FakeDiscord() as fake:
        configure(home, fake)
        text = toml.read_text()
        assert text.count('concurrency = "global"\n') == 1  # in [runtime]
        toml.write_text(text.replace(
            'concurrency = "global"\n',
            'concurrency = "global"\nlease_ttl_s = 3\npoll_interval_s = 0.1\n'))
        async with maiden_run(home, env(fake)) as (proc, out, err):
            await out.wait_for("Ctrl-C stops.")
            await fake.identified(1, timeout=30)  # the banner may come before the gateway
            link = fake.gateway.live()
            assert link is not None
            async with SQLiteStore(home / "data" / "maiden.db") as store:
                (lease,) = [x for x in await store.leases()
                            if x.name.startswith("discord:gateway:")]
                assert await store.take_lease(lease.name, "other/1@elsewhere", 30,
                                              steal_from=lease.holder) is None
                await fake.until(lambda: link.ws.closed, what="the gateway closed", timeout=30)
                await store.release_leases("other/1@elsewhere")  # the other replica stops
            await fake.identified(2, timeout=30)  # connected again: still running
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> still here?",
                                    mentions=[BOT_ID])
            (_, reply) = await fake.wait_messages(GENERAL_ID, 2, timeout=30)
            assert reply["content"] == "echo: still here?"
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0, err.text()
            await err.wait_for("lost the gateway lease")


async def test_run_without_the_message_content_intent_says_so(home: Path) -> None:
    async with FakeDiscord(World(privileged=0)) as fake:
        configure(home, fake)
        code, out, err = await maiden(home, env(fake), "run")
        assert code == 2 and "Ready" not in out  # a configuration problem
        assert "message-content intent" in err and "Traceback" not in err
        assert [line for line in err.splitlines() if line.startswith("maiden:")] == \
            [next(line for line in err.splitlines() if "message-content intent" in line)]
