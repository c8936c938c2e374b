"""``clock`` (runtime/builtins/clock.py): the date and time in an IANA zone, called as the
loop calls it; an unknown zone is an error the model can act on."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from runtime import ToolContext
from runtime.builtins.clock import clock

CTX = ToolContext(run_id="r", thread_id="t", tool_call_id="c", idempotency_key="k")


@pytest.mark.parametrize(("tz", "offsets"), [
    ("UTC", {timedelta(0)}),
    ("Asia/Kolkata", {timedelta(hours=5, minutes=30)}),  # no daylight saving
    ("Europe/Paris", {timedelta(hours=1), timedelta(hours=2)}),
])
async def test_the_time_is_told_in_the_zone_asked(tz: str, offsets: set[timedelta]) -> None:
    output = await clock.call(CTX, clock.validate({"tz": tz}))
    assert not output.is_error, output.content
    assert set(output.content) == {"tz", "iso", "weekday"} and output.content["tz"] == tz
    told = datetime.fromisoformat(output.content["iso"])
    assert told.utcoffset() in offsets
    assert told.microsecond == 0  # to the second
    assert output.content["weekday"] == told.strftime("%A")


async def test_utc_is_the_default_zone() -> None:
    assert clock.validate({}) == {"tz": "UTC"}
    output = await clock.call(CTX, clock.validate({}))
    assert output.content["tz"] == "UTC"
    assert datetime.fromisoformat(output.content["iso"]).utcoffset() == timedelta(0)


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "", "../etc/passwd", "Europe/"])
async def test_an_unknown_zone_is_an_error_naming_it(tz: str) -> None:
    output = await clock.call(CTX, clock.validate({"tz": tz}))
    assert output.is_error
    error = output.content["error"]
    assert error["type"] == "exception"
    assert f"unknown time zone {tz!r}" in error["message"]
    assert "IANA name like 'Europe/Paris'" in error["message"]


def test_clock_only_reads() -> None:
    assert clock.name == "clock" and clock.effect == "read_only"
    assert not clock.requires_approval
