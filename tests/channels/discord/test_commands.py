"""``/maiden`` in Discord (docs/guides/discord.md, Commands): one command group registered with
discord.py's CommandTree in the bot's guilds, answered ephemerally through the bot's own
REST client, schedule names completed as typed, a stop posted once however often the
interaction is seen, rights as everywhere else."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from channels.discord import DiscordConfig
from channels.discord.channel import DiscordChannel, DiscordOutbound
from runtime import EchoProvider, RunState, Runtime, SQLiteStore, ToolRegistry, tool
from schedules import ScheduleConfig
from tests.channels.discord.test_channel import running
from tests.fakes.discord import BOT_ID, GENERAL_ID, GUILD_ID, HUMAN_ID, FakeDiscord, new_id
from tests.http_helpers import scheduled

HOLD = asyncio.Event()
"""Lets ``wait_here`` finish; made anew by each test that holds it (``hold``): an event is
bound to the loop it is first awaited on, and each test has its own."""


def hold() -> None:
    global HOLD
    HOLD = asyncio.Event()


@tool
async def wait_here() -> str:
    """Wait until let go."""
    await HOLD.wait()
    return "let go"


def sub(command: str, **values: Any) -> list[dict[str, Any]]:
    return [{"name": command, "type": 1, "options": [
        {"name": k, "type": 3, "value": v} for k, v in values.items()]}]


async def ask(fake: FakeDiscord, options: list[dict[str, Any]], user: Any = HUMAN_ID,
              data: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Run ``/maiden ...``; its ephemeral answer (acknowledged with an ephemeral "thinking",
    then edited in) and the interaction (to replay)."""
    sent = await fake.command("maiden", options, user_id=user, data=data)
    await fake.until(lambda: bool(fake.shown(sent)), what="an answer")
    (response,) = [r for r in fake.interaction_responses() if r.interaction_id == sent["id"]]
    assert response.type == 5 and response.ephemeral, response
    (answer,) = fake.shown(sent)
    assert answer["flags"] == 64, answer
    return str(answer["content"]), sent


async def registered(fake: FakeDiscord) -> dict[str, Any]:
    await fake.until(lambda: bool(fake.rest.commands.get(str(GUILD_ID))),
                     what="/maiden registered")
    (group,) = fake.rest.commands[str(GUILD_ID)]
    return group


async def test_the_group_is_registered_and_answers_with_rights(tmp_path: Path) -> None:
    hold()
    other = new_id()
    rules = [{"place": "*", "users": [str(other)], "rights": ["talk"]}]
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", tools=(wait_here,),
                                              rules=rules) as d:
        fake.world.add_user(other, "other")
        group = await registered(fake)
        assert group["name"] == "maiden"
        assert [o["name"] for o in group["options"]] == [
            "status", "stop", "schedules", "schedule-run", "schedule-pause", "schedule-resume",
            "usage", "memory", "forget", "help"]
        run_option = group["options"][3]["options"][0]
        assert run_option["name"] == "name" and run_option["autocomplete"] is True
        await asyncio.wait_for(d.channel.tried_registering.wait(), 10)
        assert d.channel.registered == [str(GUILD_ID)]

        listed, _ = await ask(fake, sub("help"))
        assert "`/maiden status`" in listed
        assert (await ask(fake, sub("status")))[0] == "Nothing is running here."
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> /tool wait_here {{}}",
                                mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        (run,) = await d.runtime.records.runs()
        while run.state is not RunState.AWAITING_TOOL:
            await asyncio.sleep(0.01)
            run = await d.runtime.records.get_run(run.id)
        status, _ = await ask(fake, sub("status"), user=other)
        assert status.startswith("1 run(s) here:")
        refused, _ = await ask(fake, sub("stop"), user=other)  # the human's run: needs operate
        assert "needs the 'operate' right" in refused
        stopped, interaction = await ask(fake, sub("stop"))
        assert stopped == "Stopped 1 run(s)."
        # The same interaction seen again (a replay after a reconnect): nothing more.
        await fake.command("maiden", data=interaction)
        await d.runtime.idle()
        posted = [m["content"] for m in fake.messages(GENERAL_ID)
                  if str(m["author"]["id"]) == str(BOT_ID) and m["content"].startswith("⏹")]
        assert posted == [f"⏹ <@{HUMAN_ID}> stopped 1 run(s) here."]
        usage, _ = await ask(fake, sub("usage", period="24h"))
        assert usage.startswith("The last 24 hours:\n• here: 1 run(s)")
        stranger = new_id()
        fake.world.add_user(stranger, "stranger")
        assert (await ask(fake, sub("status"), user=stranger))[0].startswith("You may not")
        HOLD.set()



async def test_registering_goes_on_while_discord_fails(tmp_path: Path) -> None:
    """Discord answering 500, or its connection cut, as a start registers ``/maiden``: the
    start tries again, backing off, instead of leaving the command out until the next one
    (the chaos soak registers at each replica's start while Discord misbehaves)."""
    async with FakeDiscord() as fake:
        route = "PUT /applications/{id}/guilds/{id}/commands"
        fake.fail(route, drop=True)
        fake.fail(route, drop=True)
        async with running(fake, tmp_path / "m.db") as d:
            group = await registered(fake)
            await asyncio.wait_for(d.channel.tried_registering.wait(), 30)
            assert d.channel.registered == [str(GUILD_ID)]
            assert group["name"] == "maiden"
            assert fake.pending_faults(route) == 0
            assert len(fake.calls(route)) == 3

async def test_schedule_names_are_completed_and_a_schedule_runs_once(tmp_path: Path) -> None:
    job = ScheduleConfig(name="standup", cron="0 9 * * 1-5", prompt="Post the standup")
    clock = lambda: datetime(2026, 12, 4, 8, 0, tzinfo=UTC)  # noqa: E731
    async with FakeDiscord() as fake, SQLiteStore(tmp_path / "m.db") as store:
        discord = DiscordOutbound(DiscordConfig(api_url=fake.api_url,
                                                allow_users=[str(HUMAN_ID)]),
                                  fake.token, guild_ready_timeout=0.05)
        async with Runtime(store, EchoProvider(), ToolRegistry(),
                           deliverers={"discord": discord.deliverer}) as rt, \
                scheduled(rt, tmp_path / "m.db", [job], clock) as scheduler, \
                DiscordChannel(rt, discord, schedules=scheduler):
            await registered(fake)
            await fake.command("maiden", [{"name": "schedule-run", "type": 1, "options": [
                {"name": "name", "type": 3, "value": "stand", "focused": True}]}],
                autocomplete=True)
            await fake.until(lambda: bool(fake.interaction_responses()), what="choices")
            choices = fake.interaction_responses()[-1]
            assert choices.type == 8 and choices.data == {
                "choices": [{"name": "standup", "value": "standup"}]}
            ran, interaction = await ask(fake, sub("schedule-run", name="standup"))
            assert ran.startswith("Schedule `standup` started: run `")
            await fake.command("maiden", data=interaction)  # seen again: the same run
            await rt.idle()
            assert len(await rt.records.runs()) == 1


async def test_global_registration_or_none(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with running(fake, tmp_path / "a.db", commands="global") as d:
            await asyncio.wait_for(d.channel.tried_registering.wait(), 10)
            assert d.channel.registered == ["global"]
            (group,) = fake.rest.commands["global"]
            assert group["name"] == "maiden" and str(GUILD_ID) not in fake.rest.commands
        async with running(fake, tmp_path / "b.db", commands="off") as d:
            await asyncio.wait_for(d.channel.tried_registering.wait(), 10)
            assert d.channel.registered is None


async def test_an_answer_past_2000_characters_is_cut_to_discords_limit(tmp_path: Path) -> None:
    """Discord refuses a response whose content passes 2,000 characters (50035), and the
    person would hear nothing: a long ``/maiden status`` is cut at a line, ending in "…"."""
    hold()
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", tools=(wait_here,)) as d:
        await registered(fake)
        # One waits in its tool, the others queue behind it: a line each.
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> /tool wait_here {{}}",
                                mentions=[BOT_ID])
        for i in range(1, 24):
            await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> question {i:02d} "
                                    + "and a long question " * 4, mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(24), 10)
        status, _ = await ask(fake, sub("status"))
        assert status.startswith("24 run(s) here:") and status.endswith("\n…")
        assert len(status) <= 2_000
        edits = fake.calls("PATCH /webhooks/{id}/{id}/messages/{id}")
        assert fake.uncovered == set() and [c.status for c in edits] == [200]
        HOLD.set()


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy."""
    return f"deployed to {env}"


async def test_a_status_links_to_the_prompt_in_discords_markup(tmp_path: Path) -> None:
    """The approval's prompt is linked as Discord writes links (``[text](url)``), not as
    Slack does (``<url|text>``, which Discord shows as written)."""
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", tools=(deploy,)) as d:
        await registered(fake)
        await fake.user_message(GENERAL_ID, HUMAN_ID, f'<@{BOT_ID}> /tool deploy {{"env": "qa"}}',
                                mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        status, _ = await ask(fake, sub("status"))
        assert "waits for a person (approve it on [its prompt](https://" in status, status
        assert "|its prompt>" not in status


async def test_a_deferred_answer_is_shown_though_discord_fails_at_first(
        tmp_path: Path) -> None:
    """A command is acknowledged ("thinking"), then its answer edited in: while Discord
    fails the edit (a 500, the connection cut), it is tried again, not dropped, so the
    person is not left with an empty answer (chaos, seed 8080)."""
    async with FakeDiscord() as fake:
        route = "PATCH /webhooks/{id}/{id}/messages/{id}"
        fake.fail(route, status=500)
        fake.fail(route, drop=True)
        async with running(fake, tmp_path / "m.db"):
            await registered(fake)
            sent = await fake.command("maiden", sub("usage", period="7d"))
            await fake.until(lambda: len(fake.calls(route)) == 3, what="the third edit",
                             timeout=30)
            await fake.until(lambda: fake.pending_faults(route) == 0, what="faults used")

            def shown() -> list[str]:
                return [str(m.get("content") or "") for m in fake.ephemerals(GENERAL_ID)
                        if str((m.get("interaction_metadata") or {}).get("id"))
                        == str(sent["id"])]

            await fake.until(lambda: any(shown()), what="the answer shown", timeout=30)
    assert fake.interaction_responses()[-1].type == 5
    (answer,) = shown()
    assert "run(s)" in answer, answer
