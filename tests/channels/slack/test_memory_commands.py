"""``/maiden memory`` and ``/maiden forget ID`` in Slack (docs/guides/memory-and-knowledge.md,
Seeing and correcting what it knows): what applies where the command is typed, with short
ids and sources; forgetting one only for who said it, the person it is about, or someone
with ``operate``; a memory learned in a DM never listed in a channel."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from runtime.model.memories import PersonScope, PlaceScope, WorkspaceScope
from tests.channels.memory_seeds import plant, said
from tests.channels.slack.test_channel import C, running
from tests.fakes.slack import FakeSlack, slash_command
from tests.fakes.slack.payloads import TEAM

RULES = [{"place": "*", "users": ["U1", "U2"], "rights": ["talk"]},
         {"place": "dm", "users": ["U1"], "rights": ["talk"]},
         {"place": "*", "users": ["UOPS"], "rights": ["talk", "operate"]}]


async def command(fake: FakeSlack, user: str, text: str, channel: str = C,
                  channel_name: str = "general") -> str:
    sent = await fake.socket_command(slash_command(TEAM, channel, user, text,
                                                   channel_name=channel_name))
    ack = await fake.acked(sent)
    payload: dict[str, Any] = ack.get("payload") or {}
    assert payload.get("response_type") == "ephemeral", ack
    return str(payload.get("text"))


def ids(listed: str) -> dict[str, str]:
    """Each listed memory's text -> its short id."""
    return {text: short for short, text in re.findall(r"• `(\w+)` (.+?) \(", listed)}


async def test_memory_lists_what_applies_here_and_forget_keeps_to_the_rights(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            allow_users=[], rules=RULES) as s:
        thread = f"slack:{TEAM}:{C}:171.1"
        await plant(s.runtime, "standup is at 9:15", PlaceScope(channel="slack", place=C),
                    said("slack", "U1", C, thread))
        await plant(s.runtime, "deploys freeze on fridays", WorkspaceScope(),
                    said("slack", "U2", C, thread))
        await plant(s.runtime, "U2 likes tea", PersonScope(user="slack:U2"),
                    said("slack", "U2", C, thread))
        await plant(s.runtime, "my secret in a DM", WorkspaceScope(),
                    said("slack", "U1", "D0U1", f"slack:{TEAM}:D0U1", private=True))

        listed = await command(fake, "U1", "memory")
        assert listed.startswith("What I remember that applies here (2):"), listed
        assert "slack:U1, slack #" + C in listed and "; place)" in listed
        shown = ids(listed)
        assert set(shown) == {"standup is at 9:15", "deploys freeze on fridays"}
        assert all(len(short) == 8 for short in shown.values())
        assert "forget what I told you about" in listed

        # Not U1's to forget: U2 said it, and U1 lacks operate.
        refused = await command(fake, "U1", f"forget {shown['deploys freeze on fridays']}")
        assert refused.startswith("Not forgotten: only who said it"), refused
        assert (await command(fake, "U1", "forget zzzz")).startswith("There is no memory")
        assert (await command(fake, "U1", "forget")).startswith("Usage:")
        assert await command(fake, "U1", f"forget {shown['standup is at 9:15']}") == \
            "Forgotten: standup is at 9:15"
        assert await command(fake, "UOPS", f"forget {shown['deploys freeze on fridays']}") \
            == "Forgotten: deploys freeze on fridays"
        assert await command(fake, "U1", "memory") == "I remember nothing that applies here."

        # In U1's DM, what was learned there is listed (and the DM's person is U1).
        dm = await command(fake, "U1", "memory", channel="D0U1", channel_name="directmessage")
        assert set(ids(dm)) == {"my secret in a DM"}, dm
        # U2's person memory: shown to U2 (the person is in the conversation), forgettable.
        mine = await command(fake, "U2", "memory")
        assert set(ids(mine)) == {"U2 likes tea"}
        assert (await command(fake, "U2", f"forget {ids(mine)['U2 likes tea']}")
                ).startswith("Forgotten")
        assert "`/maiden memory`" in await command(fake, "U1", "help")
