"""Fixtures of the fakes' own tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.slack import FakeSlack


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    """A started fake Slack (a test module may define its own ``fake``)."""
    async with FakeSlack() as server:
        yield server
