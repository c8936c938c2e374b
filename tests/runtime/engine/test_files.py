"""Files people share: stored once by content, taken in as a run's first step under
``[files]``'s limits, shown to the model as its provider takes them (here the echo model,
which says what it received), refused with one reply that names the file and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import (
    DeliveryError,
    EchoProvider,
    FileRefused,
    FilesConfig,
    FileSource,
    ModelRequest,
    ModelResponse,
    Notice,
    Origin,
    Records,
    ReplyDelivery,
    RunState,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolFile,
    ToolRegistry,
    ToolResult,
    UserMessage,
    tool,
)
from runtime.engine.context import transcript
from runtime.engine.files import prune_files
from runtime.model.tokens import entry_tokens
from tests.samples import pdf, png

SLACK = Origin(channel="chat", target={"room": "r1"}, user="U1")


class Shelf:
    """A platform's files, served by URL, counting each download (a channel's fetcher)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.fetched: list[str] = []

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes:
        self.fetched.append(source.url)
        data = self.files[source.url]
        if len(data) > max_bytes:
            raise FileRefused(source.name, "it is bigger than it said")
        return data


def source(url: str, name: str, media: str, size: int | None = None) -> FileSource:
    return FileSource(via="chat", url=url, name=name, media_type=media, size=size)


async def test_a_file_given_with_its_bytes_is_stored_once_and_shown(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider()) as rt:
        notes = await rt.kept.files.put("notes.txt", "text/plain", b"the build is red\n")
        again = await rt.kept.files.put("copy.txt", None, b"the build is red\n")
        assert again.digest == notes.digest and again.name == "copy.txt"
        run = await rt.send("t", "what does it say?", files=[notes])
        assert run.state is RunState.COMPLETED
        assert run.reply == ("echo: what does it say?\n[received notes.txt (text/plain, "
                             "17 bytes), shown as 76 characters of text]")
        user = (await rt.records.entries("t"))[0]
        assert isinstance(user, UserMessage) and user.files == (notes,)
        assert [b.digest for b in await store.blobs()] == [notes.digest]  # once
        assert (await rt.kept.files.read(notes.digest))[1] == b"the build is red\n"


class Seen(EchoProvider):
    """The echo model, keeping the files each request showed (by digest)."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[set[str]] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.shown.append(set(request.files))
        return await super().complete(request, on_text)


async def test_a_file_later_in_a_long_thread_is_shown_and_so_are_earlier_ones(
        tmp_path: Path) -> None:
    """Threads are looked at for files once per entry (long threads without any cost
    nothing per turn): a file that comes after many plain messages is still shown, in
    that run and in the next, and after a restart."""
    db = tmp_path / "m.db"
    model = Seen()
    async with SQLiteStore(db) as store, Runtime(store, model) as rt:
        for i in range(5):
            assert (await rt.send("t", f"plain {i}")).reply == f"echo: plain {i}"
        notes = await rt.kept.files.put("notes.txt", "text/plain", b"the build is red\n")
        await rt.send("t", "and this?", files=[notes])
        await rt.send("t", "still there?")
    async with SQLiteStore(db) as store, Runtime(store, model) as rt:
        await rt.send("t", "and now?")
    assert model.shown == [set()] * 5 + [{notes.digest}] * 3


async def test_images_and_pdfs_reach_a_model_without_vision_as_notes_and_text(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider()) as rt:
        shot = await rt.kept.files.put("shot.png", "image/png", png(1200, 800))
        doc = await rt.kept.files.put("invoice.pdf", "application/pdf", pdf("Total due: 42 EUR"))
        blob = await rt.kept.files.put("dump.bin", None, bytes(range(256)) * 4)
        run = await rt.send("t", "look", files=[shot, doc, blob])
        assert run.reply is not None
        lines = run.reply.splitlines()[1:]
        assert lines[0].startswith("[received shot.png (image/png, 1200x800, ")
        assert lines[0].endswith("shown as a note]")
        assert lines[1].startswith("[received invoice.pdf (application/pdf, 1 page, ")
        assert "characters of text" in lines[1]
        assert lines[2] == "[received dump.bin (application/octet-stream, 1 KB), shown as a note]"
        assert shot.tokens > 1000 and doc.tokens == 2000  # the published estimates
        user = (await rt.records.entries("t"))[0]
        assert entry_tokens(user) > shot.tokens + doc.tokens  # counted in the window
        assert "[file shot.png (image/png, 1200x800" in transcript([user], 10_000)


async def test_files_announced_by_a_platform_are_fetched_as_the_first_step(
        tmp_path: Path) -> None:
    shelf = Shelf({"u/1": png(color=(1, 2, 3)), "u/2": b"a,b\n1,2\n", "u/3": png(color=(1, 2, 3))})
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), fetchers={"chat": shelf}) as rt:
        run = await rt.submit("t", "", origin=SLACK, fetch=[
            source("u/1", "a.png", "image/png"), source("u/2", "b.csv", "text/csv"),
            source("u/3", "same.png", "image/png")])
        assert run.fetch and not run.files  # queued with where to get them, nothing yet
        run = await rt.wait(run.id)
        assert run.state is RunState.COMPLETED
        assert shelf.fetched == ["u/1", "u/2", "u/3"]
        user = (await rt.records.entries("t"))[0]
        assert isinstance(user, UserMessage)
        assert [(f.name, f.media_type) for f in user.files] == [
            ("a.png", "image/png"), ("b.csv", "text/csv"), ("same.png", "image/png")]
        assert len(await store.blobs()) == 2  # the same picture twice is one blob


async def test_files_over_a_limit_are_refused_with_one_reply_and_the_rest_runs(
        tmp_path: Path) -> None:
    shelf = Shelf({"u/big": b"x" * 2_000, "u/ok": b"fine\n", "u/exe": b"MZ\x90\x00" * 10,
                   "u/liar": b"y" * 5_000, "u/more": b"more\n"})
    limits = FilesConfig(max_bytes=4_000, max_per_message=4,
                         allowed_types=["text/*", "image/*"])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), files=limits, fetchers={"chat": shelf}) as rt:
        run = await rt.submit("t", "read these", origin=SLACK, fetch=[
            source("u/big", "big.txt", "text/plain", size=9_000),   # too big, said so
            source("u/ok", "ok.txt", "text/plain"),
            source("u/exe", "tool.exe", "application/x-msdownload"),  # not allowed
            source("u/liar", "liar.txt", "text/plain", size=10),     # too big, once counted
            source("u/more", "more.txt", "text/plain")])             # the fifth
        run = await rt.wait(run.id)
        assert run.state is RunState.COMPLETED
        assert shelf.fetched == ["u/ok", "u/liar"]  # nothing fetched that the limits refuse
        entries = await rt.records.entries("t")
        user, notice = entries[0], entries[1]
        assert isinstance(user, UserMessage) and [f.name for f in user.files] == ["ok.txt"]
        assert isinstance(notice, Notice) and notice.code == "files_refused"
        assert notice.text.splitlines() == [
            "I could not read big.txt: it is 9 KB; at most 4 KB are read ([files] max_bytes).",
            "I could not read tool.exe: files of type application/x-msdownload are not read "
            "here ([files] allowed_types).",
            "I could not read liar.txt: it is bigger than it said.",
            "I could not read more.txt: at most 4 files are read from one message ([files] "
            "max_per_message)."]
        told = [d for d in await rt.records.deliveries(run_id=run.id)
                if isinstance(d, ReplyDelivery) and not d.answer]
        assert [d.text for d in told] == [notice.text]  # one reply for them all
        assert run.reply is not None and run.reply.startswith("echo: read these\n[received ok")


async def test_a_message_of_files_only_is_taken_and_an_empty_one_is_not(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider()) as rt:
        ref = await rt.kept.files.put("a.md", "text/markdown", b"# hi\n")
        run = await rt.send("t", "", files=[ref])
        assert run.state is RunState.COMPLETED
        with pytest.raises(Exception, match="empty"):
            await rt.send("t", "  ")


async def test_prune_removes_only_old_blobs_no_message_names(tmp_path: Path) -> None:
    clock = [1_000.0]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), clock=lambda: clock[0]) as rt:
        named = await rt.kept.files.put("kept.txt", None, b"kept\n")
        await rt.send("t", "keep", files=[named])
        orphan = await rt.kept.files.put("orphan.txt", None, b"orphan\n")
        clock[0] = 2_000.0
        young = await rt.kept.files.put("young.txt", None, b"young\n")
        removed = await prune_files(store, older_than=1_500.0)
        assert [b.digest for b in removed] == [orphan.digest]
        assert {b.digest for b in await store.blobs()} == {named.digest, young.digest}


class Plain:
    """A chat channel's deliverer that cannot upload: posts into a list."""

    max_chars: int | None = None

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def send(self, delivery: Any) -> str:
        self.sent.append((delivery.key, delivery.text))
        return f"m{len(self.sent)}"

    async def reconcile(self, delivery: Any) -> str | None:
        return None


class Chat(Plain):
    """One that can: uploads into a list too."""

    def __init__(self) -> None:
        super().__init__()
        self.uploaded: list[tuple[str, str, bytes]] = []

    async def upload(self, delivery: Any, data: bytes, started: Any) -> str:
        self.uploaded.append((delivery.key, delivery.file.name, data))
        return f"f{len(self.uploaded)}"


@tool
def export(rows: int) -> dict[str, Any]:
    """Export the table as CSV."""
    data = "n\n" + "".join(f"{i}\n" for i in range(rows))
    return {"rows": rows, "csv": ToolFile("table.csv", "text/csv", data.encode())}


async def test_a_file_a_tool_hands_back_goes_out_with_the_answer(tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {"rows": 3}}]},
                               {"text": "Here is the table."}])
    chat = Chat()
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, script, ToolRegistry([export]), deliverers={"chat": chat}) as rt:
        run = await rt.submit("t", "export it", origin=SLACK)
        run = await rt.wait(run.id)
        await rt.idle()
        assert run.reply == "Here is the table."
        (made,) = run.reply_files
        assert (made.name, made.media_type, made.size) == ("table.csv", "text/csv", 8)
        result = (await rt.records.entries("t"))[2]
        assert isinstance(result, ToolResult) and result.files == (made,)
        assert result.content["csv"] == {"file": "table.csv", "media_type": "text/csv",
                                         "size": 8, "note": "sent to the person with your answer"}
        assert [text for _, text in chat.sent] == ["Here is the table."]
        assert [(name, data) for _, name, data in chat.uploaded] == [("table.csv", b"n\n0\n1\n2\n")]
        kinds = [d.kind for d in await rt.records.deliveries(run_id=run.id)]
        assert kinds == ["reply", "file"]  # the answer, then its file
        assert (await rt.kept.files.read(made.digest))[1] == b"n\n0\n1\n2\n"


async def test_a_channel_that_cannot_upload_is_told_the_files_name(tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {"rows": 1}}]},
                               {"text": "Done."}])
    plain = Plain()
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, script, ToolRegistry([export]), deliverers={"chat": plain}) as rt:
        run = await rt.wait((await rt.submit("t", "go", origin=SLACK)).id)
        await rt.idle()
        assert [text for _, text in plain.sent] == [
            "Done.", f"📎 {run.reply_files[0].describe()}"]



class Steps(Plain):
    """One that uploads in steps: the platform's id first (handed to ``started``), then
    completing the upload, whose answer is lost the first time."""

    def __init__(self, records: Any) -> None:
        super().__init__()
        self.records = records
        self.seen: list[tuple[str | None, str | None]] = []
        """Each upload: (the id it was given, the id on record as it completes)."""
        self.reconciled: list[str | None] = []

    async def upload(self, delivery: Any, data: bytes, started: Any) -> str:
        if delivery.upload_id is None:
            await started("u1")
        (on_record,) = [d.upload_id for d in await self.records.deliveries() if d.kind == "file"]
        self.seen.append((delivery.upload_id, on_record))
        if len(self.seen) == 1:
            raise DeliveryError("the answer to completing it was lost")
        return "u1"

    async def reconcile(self, delivery: Any) -> str | None:
        if delivery.kind == "file":
            self.reconciled.append(delivery.upload_id)
        return None


async def test_an_upload_id_is_recorded_before_completing_and_handed_back(
        tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {"rows": 1}}]},
                               {"text": "Done."}])
    async with SQLiteStore(tmp_path / "m.db") as store:
        steps = Steps(Records(store))  # what the runtime reads of the store
        async with Runtime(store, script, ToolRegistry([export]),
                           deliverers={"chat": steps}) as rt:
            run = await rt.wait((await rt.submit("t", "go", origin=SLACK)).id)
            await rt.idle()
            assert steps.seen == [(None, "u1")]  # on record before the upload was completed
            await rt.operator.flush_deliveries()
            assert steps.reconciled == ["u1"]  # looked for by that id, then completed by it
            assert steps.seen == [(None, "u1"), ("u1", "u1")]
            (sent,) = [d for d in await rt.records.deliveries(run_id=run.id)
                       if d.kind == "file"]
            assert sent.remote_id == "u1"
