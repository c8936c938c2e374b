"""``channels.work.Background``: the steps a channel does not wait for."""

from __future__ import annotations

import asyncio
import logging

import pytest

from channels.work import Background
from runtime import StoreError
from tests.logs import Heard


async def test_a_step_stopped_by_maidens_own_error_is_one_line_and_a_bug_keeps_its_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store out of reach (chaos: a typing indicator's follow during a PostgreSQL cut) is
    said in one warning, not an error with a traceback; anything else keeps its trace."""
    background = Background(logging.getLogger("maiden.test"), "maiden-test")

    async def store_gone() -> None:
        raise StoreError("postgres schema s: connection reset")

    async def bug() -> None:
        raise KeyError("x")

    with caplog.at_level(logging.INFO, logger="maiden.test"), \
            Heard("maiden.test", "stopped") as stopped, Heard("maiden.test", "failed") as failed:
        background.spawn(store_gone())
        background.spawn(bug())
        async with asyncio.timeout(5):
            await stopped.said.wait()
            await failed.said.wait()
    await background.close()
    said = {r.levelname: r for r in caplog.records}
    assert said["WARNING"].getMessage() == ("maiden-test: a background step stopped: "
                                            "postgres schema s: connection reset")
    assert said["WARNING"].exc_info is None
    assert said["ERROR"].exc_info is not None
