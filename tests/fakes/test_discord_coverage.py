"""The product's Discord flows against the contract-holding fake: every request it makes
finds an entry in ``contract.CONTRACT`` (``uncovered`` stays empty), keeps its rules (no
4xx), and gets only the errors its entry documents.

The product calls discord.py's high-level methods (login, the gateway, the command tree's
sync, typing) besides its own ``Route``s, so the routes are recorded as they are served
rather than read from its source: a reply streamed past 2,000 characters with its feedback
buttons, a file a tool made, a DM, a vote, an approval prompt and its click, ``/maiden``
answered at once, deferred and completed, and ``maiden check``. A request that finds no
entry is answered 404 and noted in ``uncovered``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from discord.http import Route

from channels.discord import DiscordConfig, check
from runtime import RunState
from tests.channels.discord.test_channel import Discord, deploy, running, settle
from tests.channels.discord.test_commands import ask, registered, sub
from tests.fakes.discord import (
    BOT_ID,
    DM_ID,
    GENERAL_ID,
    GUILD_ID,
    HUMAN_ID,
    FakeDiscord,
    contract,
)
from tests.fakes.test_discord_contract import client, refused
from tests.samples import export

pytestmark = pytest.mark.timeout(60)

HOOKED = "/webhooks/{webhook_id}/{webhook_token}/messages/{message_id}"


def bot_messages(fake: FakeDiscord, channel: int = GENERAL_ID) -> list[dict[str, object]]:
    return [m for m in fake.messages(channel) if str(m["author"]["id"]) == str(BOT_ID)]


def held(fake: FakeDiscord) -> None:
    """Everything the product sent was covered, kept the rules, and was answered as
    documented."""
    assert fake.uncovered == set()
    assert fake.router.undocumented == set()
    refused = [(c.method, c.route, c.status, c.answer) for c in fake.calls()
               if 400 <= c.status < 500]
    assert refused == []


async def talk(fake: FakeDiscord, d: Discord, handled: int, text: str,
               channel: int = GENERAL_ID) -> None:
    mentions = [] if channel == DM_ID else [BOT_ID]
    await fake.user_message(channel, HUMAN_ID, (f"<@{BOT_ID}> " if mentions else "") + text,
                            mentions=mentions)
    await settle(d, handled)


async def test_replies_files_votes_and_approvals_stay_within_the_contract(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", tools=(deploy, export),
                                              edit_every_s=0.01) as d:
        await registered(fake)
        await talk(fake, d, 1, " ".join(f"word{i}" for i in range(400)))  # 3,000 characters
        streamed = bot_messages(fake)
        assert len(streamed) == 2 and all(len(str(m["content"])) <= 2000 for m in streamed)
        await talk(fake, d, 2, "/tool export {}")
        assert any(m["attachments"] for m in bot_messages(fake))
        await talk(fake, d, 3, "in private", channel=DM_ID)
        assert bot_messages(fake, DM_ID)

        votes = streamed[-1]["components"][0]["components"]  # type: ignore[index]
        vote = await fake.click(streamed[-1], votes[0]["custom_id"])
        await fake.until(lambda: bool(fake.shown(vote)), what="a vote")
        await talk(fake, d, 4, '/tool deploy {"env": "prod"}')
        prompt = bot_messages(fake)[-1]
        approve = prompt["components"][0]["components"][0]["custom_id"]  # type: ignore[index]
        decided = await fake.click(prompt, approve)
        await fake.until(lambda: bool(fake.shown(decided)), what="the update")
        await d.runtime.idle()
        done = [r.reply for r in await d.runtime.records.runs()
                if r.state is RunState.COMPLETED]
        assert 'deploy returned "deployed to prod"' in done
        again = await fake.click(prompt, approve)  # decided already: a line for the clicker
        await fake.until(lambda: bool(fake.shown(again)), what="the refusal")
        assert fake.shown(again)[0]["flags"] == 64
        assert [r.type for r in fake.interaction_responses()][:2] == [5, 6]

    held(fake)
    assert {("POST", "/channels/{channel_id}/messages"),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}"),
            ("POST", "/channels/{channel_id}/typing"),
            ("POST", "/interactions/{webhook_id}/{webhook_token}/callback"),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands"),
            ("GET", "/users/@me"), ("GET", "/gateway/bot")} <= fake.served


async def test_slash_commands_and_check_stay_within_the_contract(tmp_path: Path) -> None:
    async with FakeDiscord() as fake:
        async with running(fake, tmp_path / "m.db") as d:
            await registered(fake)
            assert (await ask(fake, sub("status")))[0] == "Nothing is running here."
            await fake.command("maiden", [{"name": "schedule-run", "type": 1, "options": [
                {"name": "name", "type": 3, "value": "st", "focused": True}]}],
                autocomplete=True)
            await fake.until(lambda: len(fake.interaction_responses()) == 2, what="choices")
            assert [r.type for r in fake.interaction_responses()] == [5, 8]
            await asyncio.wait_for(d.channel.tried_registering.wait(), 10)
        ok, lines = await check.check_discord(
            DiscordConfig(api_url=fake.api_url, allow_guilds=[str(GUILD_ID)]), fake.token)
        assert ok, lines

    held(fake)
    assert {("PATCH", HOOKED), ("GET", "/applications/@me"),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands")
            } <= fake.served


# -- what has no entry is answered 404 and noted

async def test_a_route_without_an_entry_is_404_and_uncovered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(contract._BY_ROUTE, ("GET", "/channels/{channel_id}"))
    async with client() as (fake, http):
        for route in (Route("GET", "/channels/{channel_id}", channel_id=GENERAL_ID),
                      Route("GET", "/guilds/{guild_id}", guild_id=GUILD_ID)):
            error, answer = await refused(http, fake, route)
            assert error.status == 404
            assert answer == {"code": 0, "message": "404: Not Found"}
        assert fake.uncovered == {("GET", "/channels/{channel_id}"),
                                  ("GET", f"/guilds/{GUILD_ID}")}
        assert ("GET", "/users/@me") in fake.served

