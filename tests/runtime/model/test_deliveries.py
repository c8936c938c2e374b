"""Deliveries (runtime/model/deliveries.py): each kind of outbox record through the one
adapter, records from before kinds read as replies, whether one was posted, and the plain
text a channel without buttons or files shows."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runtime.model.attachments import FileRef
from runtime.model.deliveries import (
    DELIVERY,
    NOT_POSTED,
    ApprovalDelivery,
    FileDelivery,
    ReplyDelivery,
    StreamDelivery,
)

COMMON: dict[str, Any] = {"key": "k", "run_id": "r", "thread_id": "t", "channel": "slack",
                          "target": {"channel": "C1"}}
REPORT = FileRef(name="report.pdf", media_type="application/pdf", size=120_000,
                 digest="ab" * 32, pages=3)


def _prompt(reason: str = "requires_approval") -> ApprovalDelivery:
    return ApprovalDelivery(**COMMON, tool_call_id="c1", name="deploy",
                            arguments={"env": "prod", "count": 2}, arguments_hash="0" * 64,
                            reason=reason)


@pytest.mark.parametrize("delivery", [
    ReplyDelivery(**COMMON, text="hello", feedback=True),
    _prompt(),
    StreamDelivery(**COMMON, state="streaming", remote_ids=("1.1", "1.2")),
    FileDelivery(**COMMON, file=REPORT, upload_id="F1"),
])
def test_each_kind_round_trips_through_the_one_adapter(delivery: Any) -> None:
    back = DELIVERY.validate_json(DELIVERY.dump_json(delivery))
    assert type(back) is type(delivery) and back == delivery


def test_a_record_written_before_deliveries_had_kinds_is_a_reply() -> None:
    old = {k: v for k, v in COMMON.items()} | {"text": "hello"}
    back = DELIVERY.validate_python(old)
    assert isinstance(back, ReplyDelivery) and back.text == "hello" and back.answer


@pytest.mark.parametrize("record", [
    COMMON | {"kind": "reply"},  # no text
    COMMON | {"kind": "reply", "text": "x", "colour": "red"},
    COMMON | {"kind": "stream", "state": "closed"},
])
def test_a_record_that_is_not_one_is_refused(record: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DELIVERY.validate_python(record)


@pytest.mark.parametrize(("remote_id", "posted"), [(None, False), (NOT_POSTED, False),
                                                   ("1712345678.000100", True)])
def test_posted_means_a_message_is_there(remote_id: str | None, posted: bool) -> None:
    assert ReplyDelivery(**COMMON, text="x", remote_id=remote_id).posted is posted


def test_the_plain_text_of_a_prompt_a_file_and_a_stream() -> None:
    assert _prompt().text == 'deploy {"count":2,"env":"prod"} needs approval.'
    assert _prompt("uncertain_side_effect").text == (
        'deploy {"count":2,"env":"prod"} may have run already before a crash.')
    assert FileDelivery(**COMMON, file=REPORT).text == (
        "📎 report.pdf (application/pdf, 3 pages, 120 KB)")
    assert StreamDelivery(**COMMON).text == ""
