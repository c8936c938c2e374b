"""The store contract, the outbox (DESIGN §3): deliveries pending and sent, on every backend."""

from __future__ import annotations

import json

import pytest

from runtime.errors import NotFound
from runtime.model.attachments.refs import FileRef
from runtime.model.entries import AssistantTurn
from runtime.model.runs import (
    DELIVERY,
    ApprovalDelivery,
    FileDelivery,
    ReplyDelivery,
    StreamDelivery,
)
from runtime.stores.base import Checkpoint
from tests.runtime.stores.contract import AnyStore, S, advance, started

# -- deliveries


async def test_deliveries_pending_and_delivered(store: AnyStore) -> None:
    one = await started(store, thread_id="t")
    two = await started(store, thread_id="u")
    d1 = ReplyDelivery(key="k1", run_id=one.id, thread_id="t", channel="slack",
                       target={"channel": "C1"}, text="réponse", created_at=10.0)
    d2 = ReplyDelivery(key="k2", run_id=two.id, thread_id="u", channel="discord", text="b",
                       created_at=5.0)
    done_one, _ = advance(one, S.COMPLETED, reply="réponse")
    await store.commit(Checkpoint("t", 1, [AssistantTurn(run_id=one.id, text="réponse")],
                                  run=done_one, deliveries=[d1]))
    await store.commit(Checkpoint("u", 1, deliveries=[d2]))
    # Each thread's in the order written; no order across threads is promised.
    assert sorted(await store.deliveries(), key=lambda d: d.key) == [d1, d2]
    assert sorted(await store.deliveries(pending=True), key=lambda d: d.key) == [d1, d2]
    assert await store.deliveries(run_id=one.id) == [d1]

    # A failed send is counted and its error kept, and the delivery stays pending.
    await store.delivery_failed("k1", "SlackApiError: channel_not_found")
    await store.delivery_failed("k1", "TimeoutError: ")
    assert sorted(await store.deliveries(pending=True), key=lambda d: d.key) == [
        d1.model_copy(update={"attempts_failed": 2, "last_error": "TimeoutError: "}), d2]
    d1 = d1.model_copy(update={"attempts_failed": 2, "last_error": "TimeoutError: "})

    await store.mark_delivered("k1", "msg-1", at=20.0)
    await store.mark_delivered("k1", "msg-other", at=30.0)  # idempotent: the first one stays
    sent = d1.model_copy(update={"remote_id": "msg-1", "delivered_at": 20.0})
    assert await store.deliveries(pending=True) == [d2]
    assert await store.deliveries(pending=False) == [sent]
    assert await store.deliveries(run_id=one.id, pending=False) == [sent]

    # Insert-or-ignore by key: a retried checkpoint cannot reset a sent delivery.
    await store.commit(Checkpoint("t", 2, deliveries=[d1]))
    await store.commit(Checkpoint("u", 1, deliveries=[d1.model_copy(update={"text": "x"})]))
    assert await store.deliveries(run_id=one.id) == [sent]
    with pytest.raises(NotFound):
        await store.mark_delivered("nope", "m", at=1.0)
    with pytest.raises(NotFound):
        await store.delivery_failed("nope", "e")
    await store.delivery_failed("k1", "late")  # sent already: nothing changes
    assert await store.deliveries(run_id=one.id) == [sent]


async def test_a_threads_deliveries_not_sent_yet(store: AnyStore) -> None:
    """``thread_id``: the records of the thread's runs (what a run's end sends before its
    own), in the order they were written, with or without ``pending``: not by their stamps,
    which are the writing process's clock (a record written while that clock was 5 s ahead,
    then one after it was put right, are posted in the order of their runs: chaos, seed 7,
    a Discord thread's replies out of order)."""
    one, two = await started(store, thread_id="t"), await started(store, thread_id="u")
    made = [ReplyDelivery(key=f"k{i}", run_id=run.id, thread_id=run.thread_id,
                          channel="slack", target={"channel": "C1"}, text=str(i),
                          created_at=float(at))
            for i, (run, at) in enumerate([(one, 3), (two, 1), (one, 2), (two, 4)])]
    for d in made:
        await store.commit(Checkpoint(d.thread_id, None, deliveries=[d]))
    await store.mark_delivered("k2", "m2", at=5.0)
    sent = made[2].model_copy(update={"remote_id": "m2", "delivered_at": 5.0})
    assert await store.deliveries(thread_id="t", pending=True) == [made[0]]
    assert await store.deliveries(thread_id="t") == [made[0], sent]
    assert await store.deliveries(thread_id="u", pending=True) == [made[1], made[3]]
    assert await store.deliveries(thread_id="u", run_id=one.id) == []
    assert await store.deliveries(thread_id="nowhere", pending=True) == []


async def test_a_delivery_is_claimed_by_one_sender_at_a_time(store: AnyStore) -> None:
    """Chaos finding 23: two processes that each believed a record theirs to send posted it
    twice; the store's claim, taken just before the send, says who sends."""
    run = await started(store, thread_id="t")
    d = ReplyDelivery(key="k", run_id=run.id, thread_id="t", channel="slack", text="a",
                      created_at=1.0)
    await store.commit(Checkpoint("t", None, deliveries=[d]))
    mine = await store.claim_delivery("k", "r0", at=100.0, ttl_s=60.0)
    assert (mine.sender, mine.sending_since, mine.attempts_failed) == ("r0", 100.0, 0)
    # Another process is refused while the claim is young; the same one renews it.
    assert (await store.claim_delivery("k", "r1", at=159.0, ttl_s=60.0)).sender == "r0"
    assert (await store.claim_delivery("k", "r0", at=120.0, ttl_s=60.0)).sending_since == 120.0
    # A failed send drops the claim: anyone may try again at once.
    await store.delivery_failed("k", "TimeoutError: ")
    [failed] = await store.deliveries(run_id=run.id)
    assert (failed.sender, failed.sending_since, failed.attempts_failed) == (None, None, 1)
    assert (await store.claim_delivery("k", "r1", at=121.0, ttl_s=60.0)).sender == "r1"
    # Taken over once the claim is old, or from a sender known to be gone: a failed attempt
    # (it may have posted: whoever sends it now reconciles first).
    old = await store.claim_delivery("k", "r2", at=181.0, ttl_s=60.0)
    assert (old.sender, old.attempts_failed) == ("r2", 2)
    assert "r1" in (old.last_error or "")
    stolen = await store.claim_delivery("k", "r0", at=182.0, ttl_s=60.0, steal_from="r2")
    assert (stolen.sender, stolen.attempts_failed) == ("r0", 3)
    # Once sent, a claim changes nothing and says who sent it.
    await store.mark_delivered("k", "msg-1", at=183.0)
    sent = await store.claim_delivery("k", "r1", at=999.0, ttl_s=60.0)
    assert (sent.remote_id, sent.sender) == ("msg-1", "r0")
    assert await store.deliveries(run_id=run.id) == [sent]
    with pytest.raises(NotFound):
        await store.claim_delivery("nope", "r0", at=1.0, ttl_s=60.0)


async def test_approval_prompts_are_deliveries_too(store: AnyStore) -> None:
    run = await started(store, thread_id="t")
    prompt = ApprovalDelivery(key="p1", run_id=run.id, thread_id="t", channel="slack",
                              target={"channel": "C1"}, tool_call_id="c1", name="deploy",
                              arguments={"env": "prod", "n": [1, None]}, arguments_hash="h",
                              reason="requires_approval", asked_by="U1", created_at=3.0)
    paused, _ = advance(run, S.AWAITING_APPROVAL)
    await store.commit(Checkpoint("t", None, run=paused, deliveries=[prompt]))
    assert await store.deliveries(pending=True) == [prompt]
    await store.mark_delivered("p1", "ts-1", at=4.0)
    [sent] = await store.deliveries(run_id=run.id)
    assert isinstance(sent, ApprovalDelivery)
    assert sent == prompt.model_copy(update={"remote_id": "ts-1", "delivered_at": 4.0})


def test_delivery_records_without_a_kind_are_replies() -> None:
    # Records written before deliveries had kinds.
    old = {"key": "k", "run_id": "r", "thread_id": "t", "channel": "slack", "text": "hi"}
    assert isinstance(DELIVERY.validate_python(old), ReplyDelivery)
    assert isinstance(DELIVERY.validate_json(json.dumps(old)), ReplyDelivery)


async def test_a_stream_records_its_messages_then_finishes(store: AnyStore) -> None:
    run = await started(store, thread_id="t")
    stream = StreamDelivery(key="s1", run_id=run.id, thread_id="t", channel="slack",
                            target={"channel": "C1", "thread_ts": "1.2"}, created_at=3.0)
    await store.commit(Checkpoint("t", None, deliveries=[stream]))
    assert await store.deliveries(run_id=run.id) == [stream]  # opening, no ids yet
    await store.stream_progress("s1", "streaming", ["171.5"], at=4.0)
    await store.stream_progress("s1", "streaming", ["171.5", "171.9"], at=5.0)
    (streaming,) = await store.deliveries(pending=True)
    assert isinstance(streaming, StreamDelivery)
    assert streaming.state == "streaming" and streaming.remote_ids == ("171.5", "171.9")
    await store.stream_progress("s1", "finished", ["171.5", "171.9"], at=6.0)
    await store.stream_progress("s1", "streaming", [], at=7.0)  # finished: left alone
    (done,) = await store.deliveries(run_id=run.id, pending=False)
    assert done == stream.model_copy(update={
        "state": "finished", "remote_ids": ("171.5", "171.9"), "remote_id": "171.5,171.9",
        "delivered_at": 6.0})
    with pytest.raises(NotFound):
        await store.stream_progress("nope", "streaming", [], at=1.0)


async def test_a_file_records_its_upload_id_until_it_is_sent(store: AnyStore) -> None:
    run = await started(store, thread_id="t")
    report = FileRef(name="report.csv", media_type="text/csv", size=8, digest="ab" * 32)
    upload = FileDelivery(key="f1", run_id=run.id, thread_id="t", channel="slack",
                          target={"channel": "C1", "thread_ts": "1.2"}, file=report,
                          created_at=3.0)
    reply = ReplyDelivery(key="r1", run_id=run.id, thread_id="t", channel="slack", text="hi")
    await store.commit(Checkpoint("t", None, deliveries=[reply, upload]))
    await store.upload_started("f1", "F0AAA")
    await store.upload_started("f1", "F0BBB")  # a ticket Slack discarded, replaced
    (pending,) = [d for d in await store.deliveries(pending=True) if d.key == "f1"]
    assert pending == upload.model_copy(update={"upload_id": "F0BBB"})
    await store.mark_delivered("f1", "F0BBB", at=5.0)
    await store.upload_started("f1", "F0CCC")  # sent: left alone
    (sent,) = await store.deliveries(pending=False)
    assert sent == upload.model_copy(update={"upload_id": "F0BBB", "remote_id": "F0BBB",
                                             "delivered_at": 5.0})
    with pytest.raises(NotFound):
        await store.upload_started("nope", "F0AAA")
    with pytest.raises(NotFound):
        await store.upload_started("r1", "F0AAA")  # a reply has no upload
