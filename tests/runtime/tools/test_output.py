"""What a tool call hands back (runtime/tools/output.py): its result as JSON, the files and
images in it split out and described for the model, and the error a failed call gives."""

from __future__ import annotations

import gc
from datetime import date
from typing import Any

import pytest

from runtime.tools.output import (
    ToolFile,
    ToolImage,
    ToolOutput,
    error_result,
    jsonable,
    split_files,
)

REPORT = ToolFile(name="report.txt", data=b"hi", media_type="text/plain")
CHART = ToolImage(media_type="image/png", data=b"\x89PNG....")


@pytest.mark.parametrize(("value", "expected"), [
    ({"n": 1, "when": date(2026, 1, 2)}, {"n": 1, "when": "2026-01-02"}),
    ((1, "a"), [1, "a"]),
    ({1: {"x"}}, {"1": ["x"]}),
    (None, None),
])
def test_a_result_without_files_is_plain_json(value: Any, expected: Any) -> None:
    assert jsonable(value) == expected


def test_files_and_images_are_left_as_they_are_in_json() -> None:
    value = ({"csv": REPORT, 2: date(2026, 1, 2)}, [CHART, 1])
    assert jsonable(value) == [{"csv": REPORT, "2": "2026-01-02"}, [CHART, 1]]
    assert jsonable(REPORT) is REPORT


def test_split_files_describes_each_file_and_image_and_keeps_them_in_order() -> None:
    second = ToolFile(name="b.csv", data=b"a,b\n", media_type="text/csv")
    output = split_files({"files": [REPORT, {"more": second}], "shown": CHART, "n": 3})
    assert output == ToolOutput(
        {"files": [{"file": "report.txt", "media_type": "text/plain", "size": 2,
                    "note": "sent to the person with your answer"},
                   {"more": {"file": "b.csv", "media_type": "text/csv", "size": 4,
                             "note": "sent to the person with your answer"}}],
         "shown": {"type": "image", "media_type": "image/png", "size": 8,
                   "note": "shown to you with this result"},
         "n": 3},
        files=(REPORT, second), images=(CHART,))
    assert not output.is_error


def test_a_result_that_is_a_file_is_described() -> None:
    output = split_files(REPORT)
    assert output.content == REPORT.described() and output.files == (REPORT,)
    assert split_files("plain") == ToolOutput("plain")


def test_files_are_split_out_of_a_result_without_leaving_a_reference_cycle() -> None:
    """A result is walked at every call: what the walk makes dies with it, not at the
    garbage collector's next pass (a closure that calls itself is a cycle)."""
    report = ToolFile(name="report.txt", data=b"hi", media_type="text/plain")
    value = {"found": [1, {"file": report}], "note": "x"}
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            output = split_files(value)
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert output.files == (report,)
    assert output.content == {"found": [1, {"file": report.described()}], "note": "x"}


def test_an_error_result_is_the_json_error_the_model_is_shown() -> None:
    output = error_result("timeout", "clock did not finish within 5 s")
    assert output.is_error and output.files == () and output.images == ()
    assert output.content == {"error": {"type": "timeout",
                                        "message": "clock did not finish within 5 s"}}
