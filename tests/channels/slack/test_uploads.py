"""Files a tool made, uploaded to Slack (docs/guides/files.md) in Slack's three steps,
the file's id recorded in the outbox before the upload is completed: an upload cut off, or
whose answer was lost, is reconciled by that id (``files.info``), never by comparing Slack's
timestamps with the host's clock, and is in the thread once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from channels.slack.deliverer import shared_in
from runtime import FileDelivery, ScriptedProvider
from tests.channels.slack.test_channel import C, Slack, running
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.fakes.slack.store import SlackError
from tests.samples import REPORT, export

SKEW_S = -30.0
"""Slack's clock against the host's, in every test here."""


@asynccontextmanager
async def exported(fake: FakeSlack, db: Path) -> AsyncIterator[Slack]:
    """A person asks for an export in #general; the run answers with its file."""
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {}}]},
                               {"text": "Here it is."}])
    fake.store.skew_s = SKEW_S
    async with running(fake, db, stream="off", provider=script, tools=(export,)) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> export", mention=True)
        await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        yield s


def files_shared(fake: FakeSlack) -> list[str]:
    """The ids of the files the bot's messages in #general show."""
    return [f["id"] for m in fake.messages(C) if m.get("user") == BOT_USER
            for f in m.get("files") or []]


async def record(s: Slack) -> FileDelivery:
    (found,) = [d for d in await s.runtime.records.deliveries() if isinstance(d, FileDelivery)]
    return found


async def test_an_upload_cut_off_before_completing_is_completed_by_its_recorded_id(
        tmp_path: Path) -> None:
    fake = FakeSlack()
    fake.fail("files.completeUploadExternal", error="internal_error")
    async with fake, exported(fake, tmp_path / "m.db") as s:
        cut = await record(s)
        assert cut.remote_id is None and files_shared(fake) == []
        assert cut.upload_id is not None and list(fake.uploads.pending) == [cut.upload_id]
        await s.runtime.operator.flush_deliveries()  # what a serving runtime does every few seconds
        assert files_shared(fake) == [cut.upload_id]
        done = await record(s)
        assert done.remote_id == done.upload_id == cut.upload_id
        assert fake.uploads.uploaded == {cut.upload_id: REPORT.data}
        assert len(fake.calls("files.getUploadURLExternal")) == 1  # no second upload


async def test_a_completion_whose_answer_was_lost_is_found_by_the_files_id(
        tmp_path: Path) -> None:
    """Completed (the file shared, 30 s "before" the record by Slack's clock), the answer
    lost: found shared in the thread by its id, not uploaded again."""
    fake = FakeSlack()
    fake.fail("files.completeUploadExternal", drop=True)
    async with fake, exported(fake, tmp_path / "m.db") as s:
        lost = await record(s)
        assert lost.remote_id is None and files_shared(fake) == [lost.upload_id]
        await s.runtime.operator.flush_deliveries()
        assert files_shared(fake) == [lost.upload_id]
        assert (await record(s)).remote_id == lost.upload_id
        assert len(fake.calls("files.getUploadURLExternal")) == 1
        assert len(fake.calls("files.completeUploadExternal")) == 1
        assert fake.calls("files.info") == [{"file": lost.upload_id}]


async def test_a_completed_upload_whose_share_is_not_shown_yet_is_not_uploaded_again(
        tmp_path: Path) -> None:
    """``files.info`` does not show the share yet: completing the upload again is refused
    (Slack completes an upload once) and the file exists, so it was completed."""
    fake = FakeSlack()
    fake.fail("files.completeUploadExternal", drop=True)
    async with fake, exported(fake, tmp_path / "m.db") as s:
        lost = await record(s)
        assert lost.upload_id is not None
        fake.uploads.shares[lost.upload_id] = {}
        await s.runtime.operator.flush_deliveries()
        assert files_shared(fake) == [lost.upload_id]
        assert (await record(s)).remote_id == lost.upload_id
        assert len(fake.calls("files.getUploadURLExternal")) == 1


async def test_a_ticket_slack_discarded_is_uploaded_anew(tmp_path: Path) -> None:
    fake = FakeSlack()
    fake.fail("files.completeUploadExternal", error="internal_error")
    async with fake, exported(fake, tmp_path / "m.db") as s:
        cut = await record(s)
        assert cut.upload_id is not None
        fake.uploads.discard(cut.upload_id)  # left uncompleted too long
        await s.runtime.operator.flush_deliveries()
        (shared,) = files_shared(fake)
        assert shared != cut.upload_id
        done = await record(s)
        assert done.remote_id == done.upload_id == shared
        assert len(fake.calls("files.getUploadURLExternal")) == 2


async def test_an_upload_a_person_deleted_is_not_uploaded_again(tmp_path: Path) -> None:
    fake = FakeSlack()
    fake.fail("files.completeUploadExternal", drop=True)
    async with fake, exported(fake, tmp_path / "m.db") as s:
        lost = await record(s)
        assert lost.upload_id is not None
        fake.uploads.delete(lost.upload_id)
        await s.runtime.operator.flush_deliveries()
        assert (await record(s)).remote_id == lost.upload_id
        assert len(fake.calls("files.getUploadURLExternal")) == 1
        assert len(fake.calls("files.completeUploadExternal")) == 1


async def test_files_info_and_completing_twice_answer_as_the_reference_says() -> None:
    async with FakeSlack() as fake:
        uploads = fake.uploads
        ticket = uploads.get_url({"filename": "a.txt", "length": "2"})
        with pytest.raises(SlackError, match="file_not_found"):  # a ticket is no file yet
            uploads.info({"file": ticket["file_id"]})
        with pytest.raises(SlackError, match="invalid_arguments"):
            uploads.info({})
        uploads.pending[ticket["file_id"]]["data"] = b"hi"
        complete = {"files": [{"id": ticket["file_id"], "title": "a.txt"}],
                    "channel_id": C}
        uploads.complete(complete)
        with pytest.raises(SlackError, match="file_not_found"):  # "can only be called once"
            uploads.complete(complete)
        info = uploads.info({"file": ticket["file_id"]})["file"]
        (share,) = info["shares"]["public"][C]
        assert "thread_ts" not in share and info["channels"] == [C]
        uploads.delete(ticket["file_id"])
        with pytest.raises(SlackError, match="file_deleted"):
            uploads.info({"file": ticket["file_id"]})


T = {"channel": "C1", "thread_ts": "100.1"}


@pytest.mark.parametrize(("shares", "target", "found"), [
    ({"public": {"C1": [{"ts": "100.5", "thread_ts": "100.1"}]}}, T, True),
    ({"private": {"C1": [{"ts": "100.5", "thread_ts": "100.1"}]}}, T, True),
    ({"public": {"C1": [{"ts": "100.5", "thread_ts": "100.2"}]}}, T, False),  # another thread
    ({"public": {"C1": [{"ts": "100.5"}]}}, T, False),  # the channel, not the thread
    ({"public": {"C2": [{"ts": "100.5", "thread_ts": "100.1"}]}}, T, False),
    ({}, T, False),
    ({"public": {"C1": [{"ts": "100.5"}]}}, {"channel": "C1"}, True),
    ({"public": {"C1": [{"ts": "100.5", "thread_ts": "100.5"}]}}, {"channel": "C1"}, True),
    ({"public": {"C1": [{"ts": "100.5", "thread_ts": "100.1"}]}}, {"channel": "C1"}, False),
])
def test_shared_in(shares: dict[str, Any], target: dict[str, str], found: bool) -> None:
    assert shared_in({"id": "F1", "shares": shares}, target) is found
