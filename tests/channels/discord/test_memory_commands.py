"""``/maiden memory`` and ``/maiden forget`` in Discord: registered as subcommands of the
group, answered ephemerally with what applies in the channel (a guild channel's memories,
never a DM's), forgetting one only for who said it or someone with ``operate``."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.model.memories import PlaceScope, WorkspaceScope
from tests.channels.discord.test_channel import running
from tests.channels.discord.test_commands import ask, registered, sub
from tests.channels.memory_seeds import plant, said
from tests.fakes.discord import DM_ID, GENERAL_ID, GUILD_ID, HUMAN_ID, FakeDiscord, new_id


async def test_memory_and_forget_in_a_guild_channel(tmp_path: Path) -> None:
    ops = new_id()
    rules = [{"place": "*", "users": [str(HUMAN_ID)], "rights": ["talk"]},
             {"place": "*", "users": [str(ops)], "rights": ["talk", "operate"]}]
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", rules=rules,
                                              allow_users=[]) as d:
        fake.world.add_user(ops, "ops")
        group = await registered(fake)
        forget = next(o for o in group["options"] if o["name"] == "forget")
        assert [o["name"] for o in forget["options"]] == ["id"]
        general, thread = str(GENERAL_ID), f"discord:{GUILD_ID}:{GENERAL_ID}"
        here = await plant(d.runtime, "the wiki moved",
                           PlaceScope(channel="discord", place=general),
                           said("discord", str(HUMAN_ID), general, thread))
        await plant(d.runtime, "ops on call: Ana", WorkspaceScope(),
                    said("discord", str(ops), general, thread))
        await plant(d.runtime, "said in a DM", WorkspaceScope(),
                    said("discord", str(HUMAN_ID), str(DM_ID), f"discord:dm:{DM_ID}",
                         private=True))

        listed, _ = await ask(fake, sub("memory"))
        shown = {text: short for short, text in re.findall(r"• `(\w+)` (.+?) \(", listed)}
        assert set(shown) == {"the wiki moved", "ops on call: Ana"}, listed
        refused, _ = await ask(fake, sub("forget", id=shown["ops on call: Ana"]))
        assert refused.startswith("Not forgotten"), refused
        done, _ = await ask(fake, sub("forget", id=shown["the wiki moved"]))
        assert done == "Forgotten: the wiki moved"
        assert await d.runtime.kept.memories.lookup(here.id) is None
        done, _ = await ask(fake, sub("forget", id=shown["ops on call: Ana"]), user=ops)
        assert done == "Forgotten: ops on call: Ana"
