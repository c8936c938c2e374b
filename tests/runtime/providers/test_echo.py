"""The echo provider's ``/tool`` command, by table."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.providers.echo import parse_tool_command


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('/tool clock {"tz": "UTC"}', ("clock", {"tz": "UTC"})),
        ("/tool clock", ("clock", {})),
        ("  /tool my.tool-2 {}  ", ("my.tool-2", {})),
        ("/tool clock {not json", ("clock", "{not json")),
        ("hello /tool clock", None),
        ("/tools", None),
    ],
)
def test_parse_tool_command(text: str, expected: Any) -> None:
    assert parse_tool_command(text) == expected
