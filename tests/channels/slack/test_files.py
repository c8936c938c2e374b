"""Files shared in Slack (docs/guides/files.md): downloaded with the bot token from
``url_private_download`` as the run's first step, shown to the model, once each; Slack's
sign-in page instead of a file is refused with the reason, never stored as the file."""

from __future__ import annotations

from pathlib import Path

from runtime import FileDelivery, ScriptedProvider
from tests.channels.slack.test_channel import C, running
from tests.fakes.bystander import bystander
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.samples import export, png


def bot_texts(fake: FakeSlack) -> list[str]:
    return [m["text"] for m in fake.messages(C) if m.get("user") == BOT_USER]


async def test_shared_files_are_fetched_once_and_shown_to_the_model(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        sent = fake.share_file(C, "U1", f"<@{BOT_USER}> what broke?", [
            ("shot.png", png(640, 480), "image/png"),
            ("build.log", b"step 3: FAILED\n", "text/plain")])
        await fake.acked(await fake.socket_event(sent))
        await fake.socket_event(sent, retry_attempt=1)  # Slack's retry: the same message
        await s.runtime.idle()
        (answer,) = bot_texts(fake)
        lines = answer.splitlines()
        assert lines[0] == "echo: what broke?"
        assert lines[1].startswith("[received shot.png (image/png, 640x480, ")
        assert lines[2].startswith("[received build.log (text/plain, 15 bytes), shown as ")
        assert [authorized for _, authorized in fake.shared.downloads] == [True, True]
        (run,) = await s.runtime.records.runs()
        assert [f.name for f in run.fetch] == ["shot.png", "build.log"]
        assert len(await s.runtime.records.entries(run.thread_id)) == 2  # message, answer


async def test_the_sign_in_page_is_refused_with_the_reason_and_the_message_runs(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        fake.shared.without_files_read = True
        sent = fake.share_file(C, "U1", f"<@{BOT_USER}> read this", [
            ("report.pdf", b"%PDF-1.4 pretend", "application/pdf")])
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        refusal, answer = bot_texts(fake)
        assert refusal == ("I could not read report.pdf: Slack sent its sign-in page instead "
                           "of the file: the bot token may not read it (the app needs the "
                           "files:read scope; add it and reinstall the app).")
        assert answer == "echo: read this"
        assert await s.runtime.kept.files.store.blobs() == []  # the page was not kept as the file


async def test_one_file_the_token_may_not_read_is_refused_and_the_others_are_read(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        sent = fake.share_file(C, "U1", f"<@{BOT_USER}> read these", [
            ("shared.log", b"from another workspace\n", "text/plain"),
            ("build.log", b"step 3: FAILED\n", "text/plain")])
        fake.shared.signed_out.add(sent["event"]["files"][0]["id"])
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        refusal, answer = bot_texts(fake)
        assert refusal.startswith("I could not read shared.log: Slack sent its sign-in page")
        assert answer.splitlines()[1].startswith("[received build.log (text/plain, 15 bytes)")
        assert [authorized for _, authorized in fake.shared.downloads] == [True, True]
        assert len(await s.runtime.kept.files.store.blobs()) == 1  # build.log's


async def test_a_file_on_another_port_is_refused_and_never_fetched(tmp_path: Path) -> None:
    async with FakeSlack() as fake, bystander() as elsewhere, \
            running(fake, tmp_path / "m.db", stream="off") as s:
        sent = fake.share_file(C, "U1", f"<@{BOT_USER}> read this", [
            ("steal.txt", b"hello\n", "text/plain")])
        for item in sent["event"]["files"]:  # the same host as the fake, another port
            item["url_private"] = item["url_private_download"] = \
                f"{elsewhere.origin}/steal-private"
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        assert elsewhere.hits == []  # no request, so no token
        refusal, answer = bot_texts(fake)
        assert refusal == (f"I could not read steal.txt: its address ({elsewhere.origin}) is "
                           "not on Slack's file hosts (https://files.slack.com, "
                           f"{fake.base_url}), so it was not fetched.")
        assert answer == "echo: read this"
        assert fake.shared.downloads == []
        assert await s.runtime.kept.files.store.blobs() == []


async def test_api_urls_own_origin_is_no_file_host_unless_listed(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            file_hosts=[]) as s:
        sent = fake.share_file(C, "U1", f"<@{BOT_USER}> read this", [
            ("notes.txt", b"hello\n", "text/plain")])
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        refusal, answer = bot_texts(fake)
        assert refusal == (f"I could not read notes.txt: its address ({fake.base_url}) is not "
                           "on Slack's file host (https://files.slack.com), so it was not "
                           "fetched.")
        assert answer == "echo: read this"
        assert fake.shared.downloads == []


async def test_a_file_without_words_is_a_message_too(tmp_path: Path) -> None:
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off") as s:
        sent = fake.share_file("D0DIRECT1", "U1", "", [("notes.md", b"# todo\n", "text/markdown")],
                               channel_type="im")
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (answer,) = [m["text"] for m in fake.messages("D0DIRECT1") if m.get("user") == BOT_USER]
        assert answer.startswith("echo: \n[received notes.md (text/markdown, 7 bytes)")



async def test_a_file_a_tool_made_is_uploaded_into_the_thread_once(tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {}}]},
                               {"text": "Here it is."}] * 2)
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            provider=script, tools=(export,)) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> export", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        answer, shared = [m for m in fake.messages(C) if m.get("user") == BOT_USER]
        assert answer["text"] == "Here it is." and answer["thread_ts"] == sent["event"]["ts"]
        assert shared["thread_ts"] == sent["event"]["ts"]  # in the same thread
        (item,) = shared["files"]
        assert (item["title"], fake.uploads.uploaded[item["id"]]) == ("report.csv", b"a,b\n1,2\n")
        (run,) = await s.runtime.records.runs()
        (delivery,) = [d for d in await s.runtime.records.deliveries(run_id=run.id)
                       if isinstance(d, FileDelivery)]
        assert delivery.remote_id == delivery.upload_id == item["id"]
        # Reconciled after a lost answer: found shared by its id, not sent again.
        assert await s.channel.deliverer.reconcile(delivery) == item["id"]  # type: ignore[union-attr]
        assert len(fake.calls("files.completeUploadExternal")) == 1
