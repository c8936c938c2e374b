"""A Discord Approve click across kill -9 (``channels/discord/acks.py``: acknowledged first,
acted on only once Discord took it, then its prompt edited): a real `maiden run` on the
fake Discord, killed by the fake at two points of the click's life, restarted.

- ``after_ack``: Discord has taken the click's deferral; nothing is decided. After the
  restart the run still waits, its prompt still has its buttons, and a second click
  decides it once.
- ``before_edit``: the decision is committed; the prompt's edit is refused (500) and the
  process killed while it tries again. After the restart the run goes on from its
  decision (the tool's effect at most once, one answer), and a click on the old prompt
  decides nothing; or, if the run had claimed the call when it was killed (it goes on
  while the prompt is edited), the call's outcome is unknown and a person is asked again.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import RunState, SQLiteStore
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.processes.test_channels_down_at_boot import maiden_run
from tests.processes.test_cli import SLOW_TOOLS
from tests.processes.test_discord_cli import configure, env

pytestmark = pytest.mark.xdist_group("crash_discord_clicks")

CALLBACK = "POST /interactions/{webhook_id}/{webhook_token}/callback"
EDIT = "PATCH /webhooks/{webhook_id}/{webhook_token}/messages/{message_id}"


def _home(home: Path, fake: FakeDiscord) -> None:
    configure(home, fake)
    (home / "ops_tools.py").write_text(SLOW_TOOLS)  # restart: non_idempotent, asks first
    text = (home / "agent.toml").read_text().replace('modules = []', 'modules = ["ops_tools"]')
    # The killed process's gateway lease is taken over soon after (as the next replica's).
    text = text.replace('concurrency = "global"\n',
                        'concurrency = "global"\nlease_ttl_s = 3\npoll_interval_s = 0.1\n')
    (home / "agent.toml").write_text(text)


def _bot(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]


def _approve(prompt: dict[str, Any]) -> str:
    (row,) = prompt["components"]
    (approve,) = [b["custom_id"] for b in row["components"] if b["label"] == "Approve"]
    return str(approve)


async def _run_state(home: Path) -> RunState:
    async with SQLiteStore(home / "data" / "maiden.db") as store:
        (run,) = await store.list_runs()
        return run.state


def _restarts(home: Path) -> list[str]:
    log = home / "restarts.log"
    return log.read_text().splitlines() if log.exists() else []


async def _asked(home: Path, fake: FakeDiscord) -> dict[str, Any]:
    """The person asks for the restart; the prompt, once posted and its id recorded (a
    click before that is told to wait a moment)."""
    await fake.identified(1, timeout=30)
    await fake.user_message(GENERAL_ID, HUMAN_ID, f'<@{BOT_ID}> /tool restart '
                            '{"service": "db"}', mentions=[BOT_ID])
    await fake.until(lambda: any(m.get("components") for m in _bot(fake)),
                     what="the approval prompt", timeout=30)
    (prompt,) = _bot(fake)
    async with SQLiteStore(home / "data" / "maiden.db") as store, asyncio.timeout(30):
        while not any(d.remote_id == str(prompt["id"])  # noqa: ASYNC110 (another process's
                      for d in await store.deliveries()):  # writes: no event reaches here)
            await asyncio.sleep(0.05)
    return prompt


async def _killed(proc: asyncio.subprocess.Process) -> None:
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL


@asynccontextmanager
async def _first(home: Path, fake: FakeDiscord) -> AsyncIterator[
        tuple[asyncio.subprocess.Process, dict[str, Any]]]:
    """`maiden run` up, with the prompt of the restart it was asked for."""
    _home(home, fake)
    async with maiden_run(home, env(fake)) as (proc, out, _):
        await out.wait_for("Ctrl-C stops.")
        yield proc, await _asked(home, fake)


@asynccontextmanager
async def _again(home: Path, fake: FakeDiscord) -> AsyncIterator[None]:
    """`maiden run` started again after the kill, up with the gateway; SIGTERMed after,
    and it must stop cleanly."""
    async with maiden_run(home, env(fake)) as (proc, out, err):
        await out.wait_for("Ctrl-C stops.")
        await fake.identified(2, timeout=30)
        yield
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, err.text()


@pytest.mark.timeout(120)
async def test_a_click_killed_after_discord_took_it_decides_nothing_and_the_next_decides_once(
        home: Path) -> None:
    async with FakeDiscord() as fake:
        async with _first(home, fake) as (proc, prompt):
            pid = proc.pid
            fake.router.after_call[CALLBACK] = lambda n: os.kill(pid, signal.SIGKILL)
            await fake.click(prompt, _approve(prompt))
            await _killed(proc)
            del fake.router.after_call[CALLBACK]
        (taken,) = fake.interaction_responses()
        assert taken.type == 6  # DEFERRED_UPDATE: Discord took it; the person saw no failure
        assert await _run_state(home) is RunState.AWAITING_APPROVAL
        assert _restarts(home) == []

        async with _again(home, fake):
            (still,) = _bot(fake)
            assert still["components"] == prompt["components"]  # still asks
            clicked = await fake.click(still, _approve(still))
            await fake.until(lambda: len(_bot(fake)) == 2 and bool(fake.shown(clicked)),
                             what="the answer and the edited prompt", timeout=30)
        edited, answer = _bot(fake)
        assert edited["content"] == f"Approved by <@{HUMAN_ID}>: `restart`"
        assert edited["components"] == []
        assert "restarted db" in answer["content"]
        assert _restarts(home) == ["db"]
        assert await _run_state(home) is RunState.COMPLETED
        assert fake.uncovered == set()


@pytest.mark.timeout(120)
async def test_a_click_killed_before_its_prompt_was_edited_goes_on_from_its_decision(
        home: Path) -> None:
    async with FakeDiscord() as fake:
        async with _first(home, fake) as (proc, prompt):
            for _ in range(10):  # (discord.py, then maiden, try a 5xx again in 1 s)
                fake.fail(EDIT, status=500)
            await fake.click(prompt, _approve(prompt))
            await fake.until(lambda: bool(fake.calls(EDIT)), what="the prompt's edit",
                             timeout=30)
            proc.kill()
            await _killed(proc)
        assert fake.unfail(EDIT) == 10 - len(fake.calls(EDIT))  # none of them carried out
        state = await _run_state(home)
        assert state is not RunState.AWAITING_APPROVAL  # decided before the edit
        ran_before = _restarts(home)
        assert ran_before in ([], ["db"])

        async with _again(home, fake):
            await fake.until(lambda: len(_bot(fake)) == 2, what="the answer", timeout=30)
            (old, then) = _bot(fake)
            if any(b.get("label") == "Approve" for row in then.get("components") or []
                   for b in row["components"]):
                # Killed after the run had claimed the call (it goes on as the decision is
                # shown): its outcome unknown, a person is asked again, as for any
                # non_idempotent call cut off (recovery), and nothing runs meanwhile.
                assert await _run_state(home) is RunState.AWAITING_APPROVAL
                assert _restarts(home) == ran_before
                return
            clicked = await fake.click(old, _approve(old))
            await fake.until(lambda: bool(fake.shown(clicked)), what="the refusal",
                             timeout=30)
            (said,) = fake.shown(clicked)
            assert "no longer current" in said["content"], said
        state = await _run_state(home)
        assert state in (RunState.COMPLETED, RunState.FAILED)
        assert len(_restarts(home)) <= 1  # a non_idempotent effect: at most once
        if state is RunState.COMPLETED:
            assert _restarts(home) == ["db"]
        assert fake.uncovered == set()
