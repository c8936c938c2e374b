"""How a tool call is shown in a streamed reply (runtime/outbox/streamer.py): its arguments
summed up in one short line, each value cut short, whitespace collapsed."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.outbox.streamer import arguments_summary


def test_a_tool_call_is_summed_up_in_one_short_line() -> None:
    assert arguments_summary({"service": "api", "n": 3}) == "service=api, n=3"
    long = arguments_summary({"query": "x" * 200, "body": {"a": [1, 2, 3]}, "c": "y" * 30})
    assert len(long) <= 60 and long.startswith("query=xxxx") and long.endswith("…")
    assert arguments_summary("plain\ntext") == "plain text"


@pytest.mark.parametrize(("arguments", "line"), [
    ({}, ""),
    ({"n": None, "ok": True, "tags": ["a", "b"]}, 'n=null, ok=true, tags=["a","b"]'),
    ({"q": "x" * 30}, "q=" + "x" * 23 + "…"),  # each value cut at 24 characters
    (["a", 1], '["a",1]'),
    ("a  b\t\n c", "a b c"),
])
def test_arguments_summary(arguments: Any, line: str) -> None:
    assert arguments_summary(arguments) == line


def test_the_line_is_cut_at_the_limit_asked() -> None:
    line = arguments_summary({"a": "1", "b": "2", "c": "3"}, limit=10)
    assert line == "a=1, b=2,…" and len(line) == 10
