"""Where a Discord message is private, and who said it (docs/guides/memory-and-knowledge.md,
"Where the platform says whether a place is private"): a guild channel ``@everyone`` cannot
view (an overwrite denying VIEW_CHANNEL to the role whose id is the guild's), a private
thread, and a public thread in a private channel are private; the sender's display name is
the source of what they teach the agent. Through the fake Discord with the real discord.py,
the echo model calling the memory tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runtime import Origin, Run, ToolResult, ToolsConfig, make_tools
from tests.channels.discord.test_channel import Discord, running
from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    HUMAN_ID,
    THREAD_ID,
    FakeDiscord,
    World,
    new_id,
)

PRIVATE, OTHER = new_id(), new_id()
SECRET_THREAD, THREAD_IN_PRIVATE = new_id(), new_id()


def world() -> World:
    """The ready-made world, Ada showing as "Ada L.", with a private channel, another
    public one, a private thread in #general and a public thread in the private channel."""
    made = World()
    made.add_user(HUMAN_ID, "ada", global_name="Ada L.")
    made.add_text_channel(PRIVATE, GUILD_ID, "secret", private=True)
    made.add_text_channel(OTHER, GUILD_ID, "random")
    made.add_thread(SECRET_THREAD, GENERAL_ID, "just us", owner_id=HUMAN_ID, private=True)
    made.add_thread(THREAD_IN_PRIVATE, PRIVATE, "plans", owner_id=HUMAN_ID)
    return made


async def say(d: Discord, channel: int, text: str) -> Run:
    """Ada mentions the bot in ``channel``; the run it made, finished."""
    handled = d.channel.inbound.handled
    await d.fake.user_message(channel, HUMAN_ID, f"<@{BOT_ID}> {text}", mentions=[BOT_ID])
    await asyncio.wait_for(d.channel.wait_handled(handled + 1), 10)
    await d.runtime.idle()
    runs = await d.runtime.records.runs()
    return max(runs, key=lambda r: r.created_at)


async def tool(d: Discord, channel: int, name: str, **args: Any) -> Any:
    run = await say(d, channel, f"/tool {name} {json.dumps(args)}")
    (result,) = [e for e in await d.runtime.records.entries(run.thread_id)
                 if isinstance(e, ToolResult) and e.run_id == run.id]
    return result.content


async def test_a_private_channel_keeps_what_is_learned_there(tmp_path: Path) -> None:
    registry = make_tools(ToolsConfig.model_validate({"builtins": ["memory"]}), tmp_path)
    async with FakeDiscord(world()) as fake, running(fake, tmp_path / "m.db",
                                                     registry=registry) as d:
        await tool(d, GENERAL_ID, "remember", text="Ada takes her tea green", scope="person")
        await tool(d, PRIVATE, "remember", text="Ada's review is in May", scope="person")
        found = await tool(d, OTHER, "recall", query="Ada")
        assert [m["text"] for m in found["memories"]] == ["Ada takes her tea green"]
        # The source names her as Discord shows her.
        assert found["memories"][0]["source"].startswith(f"Ada L., discord #{GENERAL_ID}, ")
        mine = await tool(d, PRIVATE, "recall", query="Ada")
        assert sorted(m["text"] for m in mine["memories"]) == [
            "Ada takes her tea green", "Ada's review is in May"]


async def test_which_places_are_private(tmp_path: Path) -> None:
    async with FakeDiscord(world()) as fake, running(fake, tmp_path / "m.db") as d:
        origins: dict[int, Origin] = {}
        for place in (GENERAL_ID, OTHER, THREAD_ID, PRIVATE, SECRET_THREAD,
                      THREAD_IN_PRIVATE):
            origins[place] = (await say(d, place, "hello")).origin
        await fake.user_message(DM_ID, HUMAN_ID, "hello")
        await asyncio.wait_for(d.channel.wait_handled(7), 10)
        await d.runtime.idle()
        (dm,) = await d.runtime.records.runs(thread_id=f"discord:dm:{DM_ID}")
        assert {p: o.private for p, o in origins.items()} == {
            GENERAL_ID: False, OTHER: False, THREAD_ID: False,
            PRIVATE: True, SECRET_THREAD: True, THREAD_IN_PRIVATE: True}
        assert dm.origin.private and dm.origin.direct
        assert {o.user_name for o in origins.values()} == {"Ada L."}
