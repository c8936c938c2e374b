"""Sending one outbox record through a channel (runtime/outbox/deliverer.py): a long reply
in parts, each posted once and in order; reconciled first unless fresh; a file uploaded, or
named when its bytes are gone. Against a real SQLite store and the reference chat channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import Delivery, FileRef, Origin, ReplyDelivery, Run, SQLiteStore
from runtime.model.deliveries import ApprovalDelivery, FileDelivery
from runtime.outbox.deliverer import Uploader, UploadStarted, deliver, parts, upload
from runtime.stores.base import Checkpoint
from tests.fakes.chat import MemoryChat

TARGET = {"room": "r1"}
RUN = "0" * 12 + "a" * 20
LONG = " ".join(["word"] * 20)  # 99 characters: three parts of at most 40


def _reply(text: str, *, key: str = "k", feedback: bool = False) -> ReplyDelivery:
    return ReplyDelivery(key=key, run_id=RUN, thread_id="t", channel="chat", target=TARGET,
                         text=text, feedback=feedback)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "maiden.db") as opened:
        await opened.create_run(Run(id=RUN, thread_id="t", text="hi",
                                    origin=Origin(channel="chat", target=TARGET)))
        yield opened


async def _written(store: SQLiteStore, delivery: Delivery) -> None:
    await store.commit(Checkpoint("t", None, deliveries=[delivery]))


def test_a_reply_that_fits_is_sent_whole() -> None:
    reply = _reply("short", feedback=True)
    assert parts(reply, 40) == [reply]
    assert parts(reply, None) == [reply]
    exact = _reply("x" * 40)
    assert parts(exact, 40) == [exact]


def test_a_long_reply_is_cut_into_parts_keyed_in_order_the_last_with_the_buttons() -> None:
    text = ("The first paragraph, long enough.\n\nThe second paragraph, long enough."
            "\n\nThe third one.")
    cut = parts(_reply(text, feedback=True), 40)
    assert [p.key for p in cut] == ["k:1", "k:2", "k:3"]
    assert all(isinstance(p, ReplyDelivery) and len(p.text) <= 40 for p in cut)
    assert "".join(p.text for p in cut if isinstance(p, ReplyDelivery)).replace(
        "\n", "") == text.replace("\n", "")
    assert [p.feedback for p in cut if isinstance(p, ReplyDelivery)] == [False, False, True]
    assert all(not p.feedback for p in parts(_reply(text), 40)
               if isinstance(p, ReplyDelivery))


def test_an_approval_prompt_is_never_cut() -> None:
    prompt = ApprovalDelivery(key="a", run_id=RUN, thread_id="t", channel="chat",
                              tool_call_id="c1", name="deploy", arguments={"x": "y" * 100},
                              arguments_hash="0" * 64, reason="requires_approval")
    assert parts(prompt, 40) == [prompt]


async def test_a_fresh_reply_is_posted_part_by_part_and_its_ids_recorded(
        store: SQLiteStore) -> None:
    reply = _reply(LONG)
    await _written(store, reply)
    chat = MemoryChat(max_chars=40)
    assert await deliver(store, chat, reply, fresh=True) == "m1,m2,m3"
    assert [m.key for m in chat.posted] == ["k:1", "k:2", "k:3"]
    (stored,) = await store.deliveries(run_id=RUN)
    assert stored.remote_id == "m1,m2,m3" and stored.delivered_at is not None
    assert await store.deliveries(pending=True) == []


async def test_a_retried_reply_posts_only_the_parts_not_posted_before(
        store: SQLiteStore) -> None:
    reply = _reply(LONG)
    await _written(store, reply)
    chat = MemoryChat(max_chars=40)
    first = parts(reply, 40)[0]
    await chat.send(first)  # posted, then the process died before recording it
    assert await deliver(store, chat, reply, fresh=False) == "m1,m2,m3"
    assert [m.key for m in chat.posted] == ["k:1", "k:2", "k:3"]  # part 1 not again


async def test_a_fresh_send_does_not_ask_the_channel_first(store: SQLiteStore) -> None:
    """Fresh: no earlier attempt can have reached the channel, so none is looked for (a
    key posted already is a message of another record, here)."""
    reply = _reply("hello")
    await _written(store, reply)
    chat = MemoryChat()
    await chat.send(reply)
    assert await deliver(store, chat, reply, fresh=True) == "m2"
    assert await deliver(store, chat, reply, fresh=False) == "m1"


class UploadingChat(MemoryChat):
    """The reference channel with two-step uploads (an id first, as Slack's)."""

    def __init__(self) -> None:
        super().__init__()
        self.uploaded: list[tuple[str, bytes]] = []

    async def upload(self, delivery: FileDelivery, data: bytes, started: UploadStarted
                     ) -> str:
        upload_id = delivery.upload_id or f"F{len(self.uploaded) + 1}"
        await started(upload_id)
        self.uploaded.append((delivery.key, data))
        return upload_id

    async def reconcile(self, delivery: Delivery) -> str | None:
        if isinstance(delivery, FileDelivery):
            return next((f"F{i}" for i, (key, _) in enumerate(self.uploaded, 1)
                         if key == delivery.key), None)
        return await super().reconcile(delivery)


async def _file_delivery(store: SQLiteStore, data: bytes | None) -> FileDelivery:
    digest = "cd" * 32
    if data is not None:
        digest = (await store.put_blob(data, "text/csv", 1.0)).digest
    delivery = FileDelivery(key="f", run_id=RUN, thread_id="t", channel="chat", target=TARGET,
                            file=FileRef(name="report.csv", media_type="text/csv", size=8,
                                         digest=digest))
    await _written(store, delivery)
    return delivery


async def test_a_file_is_uploaded_once_with_its_upload_id_recorded_first(
        store: SQLiteStore) -> None:
    chat = UploadingChat()
    assert isinstance(chat, Uploader)
    delivery = await _file_delivery(store, b"a,b\n1,2\n")
    assert await upload(store, chat, delivery, fresh=False) == "F1"
    assert chat.uploaded == [("f", b"a,b\n1,2\n")] and chat.posted == []
    (stored,) = await store.deliveries(run_id=RUN)
    assert isinstance(stored, FileDelivery)
    assert (stored.upload_id, stored.remote_id) == ("F1", "F1")
    assert await upload(store, chat, delivery, fresh=False) == "F1"  # found: not again
    assert len(chat.uploaded) == 1


async def test_a_file_whose_bytes_are_gone_is_named_in_a_message(store: SQLiteStore) -> None:
    chat = UploadingChat()
    delivery = await _file_delivery(store, None)  # pruned from the store
    assert await upload(store, chat, delivery, fresh=True) == "m1"
    assert chat.uploaded == [] and [m.text for m in chat.posted] == [delivery.text]
    assert delivery.text.startswith("📎 report.csv")
