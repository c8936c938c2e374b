"""One MCP server's lifecycle without a server (runtime/tools/mcp/server.py): the backoff
between restarts."""

from __future__ import annotations

import pytest

from runtime.tools.mcp.server import backoff_delay


@pytest.mark.parametrize(
    ("failures", "delay"), [(0, 1.0), (1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0),
                            (50, 60.0)])
def test_backoff_doubles_up_to_the_maximum(failures: int, delay: float) -> None:
    assert backoff_delay(failures, 1.0, 60.0) == delay
