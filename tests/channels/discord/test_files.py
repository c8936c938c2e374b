"""Attachments in Discord (docs/guides/files.md): fetched from the CDN's signed URL as
the run's first step (no token sent), shown to the model, one blob however often shared;
an expired link is refused with the reason and the message still runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import ScriptedProvider
from tests.channels.discord.test_channel import running
from tests.fakes.bystander import bystander
from tests.fakes.discord import BOT_ID, GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.samples import export, pdf, png


def bot_texts(fake: FakeDiscord) -> list[str]:
    return [m["content"] for m in fake.messages(GENERAL_ID)
            if str(m["author"]["id"]) == str(BOT_ID)]


async def test_attachments_are_fetched_from_the_cdn_and_shown(tmp_path: Path) -> None:
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db") as d:
        shot = png(300, 200)
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> look", mentions=[BOT_ID],
                                files=[("a.png", shot, "image/png"),
                                       ("spec.pdf", pdf("Spec v2"), "application/pdf")])
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> again", mentions=[BOT_ID],
                                files=[("b.png", shot, "image/png")])
        await asyncio.wait_for(d.channel.wait_handled(2), 10)
        await d.runtime.idle()
        first, second = bot_texts(fake)
        assert first.splitlines()[1].startswith("[received a.png (image/png, 300x200, ")
        assert first.splitlines()[2].startswith("[received spec.pdf (application/pdf, 1 page,")
        assert second.splitlines()[1].startswith("[received b.png (image/png, 300x200, ")
        assert [signed for _, signed in fake.cdn.downloads] == [True, True, True]
        assert len(await d.runtime.kept.files.store.blobs()) == 2  # the picture once
        calls: list[Any] = fake.calls()
        assert all("attachments" not in c.path for c in calls)  # the CDN is not the API


async def _expired_link(fake: FakeDiscord, d: Any) -> None:
    """A message whose file's link no longer holds (its signature changed), taken in."""
    posted = fake.post_as_user(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> read", mentions=[BOT_ID],
                               files=[("old.txt", b"hello\n", "text/plain")])
    for attachment in posted["attachments"]:  # the link's signature no longer holds
        attachment["url"] = attachment["url"].replace("hm=", "hm=0")
    await fake.dispatch("MESSAGE_CREATE", posted)
    await asyncio.wait_for(d.channel.wait_handled(1), 10)
    await d.runtime.idle()


async def test_an_expired_link_is_refused_and_the_message_runs(tmp_path: Path) -> None:
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db") as d:
        await _expired_link(fake, d)
        # The notice first: sent as the run starts, before the answer's message opens
        # (streamed, as the model starts writing).
        assert bot_texts(fake) == [
            "I could not read old.txt: Discord no longer has it (the link may have expired, "
            "or the file was deleted).", "echo: read"]



async def test_an_attachment_on_another_port_is_refused_and_never_fetched(
        tmp_path: Path) -> None:
    async with FakeDiscord() as fake, bystander() as elsewhere, \
            running(fake, tmp_path / "m.db") as d:
        posted = fake.post_as_user(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> read", mentions=[BOT_ID],
                                   files=[("steal.txt", b"hello\n", "text/plain")])
        for attachment in posted["attachments"]:  # the same host as the CDN, another port
            for key in ("url", "proxy_url"):
                attachment[key] = attachment[key].replace(fake.cdn_url, elsewhere.origin)
        await fake.dispatch("MESSAGE_CREATE", posted)
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        assert elsewhere.hits == []
        assert bot_texts(fake) == [
            f"I could not read steal.txt: its address ({elsewhere.origin}) is not on "
            "Discord's file hosts (https://cdn.discordapp.com, https://media.discordapp.net, "
            f"{fake.cdn_url}), so it was not fetched.", "echo: read"]
        assert fake.cdn.downloads == []


async def test_a_file_a_tool_made_is_attached_once(tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {}}]},
                               {"text": "Here it is."}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              tools=(export,)) as d:
        await fake.user_message(GENERAL_ID, HUMAN_ID, f"<@{BOT_ID}> export", mentions=[BOT_ID])
        await asyncio.wait_for(d.channel.wait_handled(1), 10)
        await d.runtime.idle()
        mine = [m for m in fake.messages(GENERAL_ID) if str(m["author"]["id"]) == str(BOT_ID)]
        answer, attached = mine
        assert answer["content"] == "Here it is."
        (item,) = attached["attachments"]
        assert item["filename"] == "report.csv"
        assert fake.rest.uploaded[item["id"]] == b"a,b\n1,2\n"
        (run,) = await d.runtime.records.runs()
        (delivery,) = [x for x in await d.runtime.records.deliveries(run_id=run.id)
                       if x.kind == "file"]
        assert delivery.remote_id == attached["id"]
        assert await d.channel.deliverer.reconcile(delivery) == attached["id"]  # type: ignore[union-attr]


async def test_the_notice_of_a_refused_file_stays_when_discord_failed_both_posts(
        tmp_path: Path) -> None:
    """Chaos finding 27 (seed 16, Discord failing as the run started and ended): the
    notice's post and the answer's stream both failed, and the outbox sent them again. The
    notice went out first; the answer's delivery then looked for its stream's message, took
    the notice (a bot reply to the same message, made since the stream began) for it and
    edited the answer into it: the person never learns the file was not read."""
    answer = "The deploy went out at 09:14."
    script = ScriptedProvider([{"text": answer, "chunks": 3}])
    async with FakeDiscord() as fake, running(fake, tmp_path / "m.db", provider=script,
                                              edit_every_s=0.05) as d:
        fake.fail("POST /channels/{id}/messages", status=503)  # the notice
        fake.fail("POST /channels/{id}/messages", status=503)  # the stream's first post
        fake.fail("GET /channels/{id}/messages", status=503)  # the run's end finds no stream
        await _expired_link(fake, d)
        for _ in range(3):  # the outbox's sweeps
            await d.runtime.operator.flush_deliveries()
        assert bot_texts(fake) == [
            "I could not read old.txt: Discord no longer has it (the link may have expired, "
            "or the file was deleted).", answer]
