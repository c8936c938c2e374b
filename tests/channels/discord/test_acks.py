"""A click whose acknowledgement's answer is lost (``channels/discord/acks.py``): Discord
took the deferral, but maiden never heard so, and cannot tell that from a callback that
never arrived. It takes the safe side: nothing is decided (an approval acted on while
Discord showed the person "This interaction failed" is what finding 43 was), the prompt
keeps its buttons, and the next click decides. Through the real discord.py client."""

from __future__ import annotations

from pathlib import Path

from tests.channels.discord.test_channel import running, settle
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord

CALLBACK = "POST /interactions/{webhook_id}/{webhook_token}/callback"


async def test_an_approval_whose_acknowledgement_went_unheard_decides_nothing(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", stream="off") as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f'<@{BOT_ID}> /tool deploy {{"env": "qa"}}',
                                mentions=[BOT_ID])
        (prompt,) = (await fake.wait_messages(GENERAL_ID, 2))[1:]
        await settle(d, 1)
        approve, _ = (b["custom_id"] for b in prompt["components"][0]["components"])
        fake.fail(CALLBACK, drop=True)  # carried out; the connection cut before the answer
        lost = await fake.click(prompt, approve)
        await fake.until(lambda: any(c.dropped for c in fake.calls(CALLBACK)),
                         what="the deferral taken, its answer cut")
        await d.runtime.idle()
        (run,) = await d.runtime.records.pending_approvals()
        assert run.decisions == () and fake.shown(lost) == []
        assert fake.messages(GENERAL_ID)[1]["components"] == prompt["components"]

        again = await fake.click(prompt, approve)
        await fake.until(lambda: bool(fake.shown(again)), what="the prompt edited")
        (shown,) = fake.shown(again)
        assert shown["content"] == f"Approved by <@{HUMAN_ID}>: `deploy`"
        done = await d.runtime.wait(run.id)
        assert [x.approve for x in done.decisions] == [True] and done.state == "completed"
        assert fake.uncovered == set()
