"""A service a tool did not declare is refused by name, whoever asks for it."""

from __future__ import annotations

import pytest

from runtime import ToolFailure
from runtime.tools.needs import needed


def test_a_declared_service_is_handed_over() -> None:
    clock = object()
    assert needed({"clock": clock}, "clock", "tool") is clock


@pytest.mark.parametrize("asker", ["tool", "prelude", "keeper"])
def test_an_undeclared_service_is_refused_naming_who_asked(asker: str) -> None:
    with pytest.raises(ToolFailure, match=rf"'memories' is not available to this {asker} "
                       r"\(declare it: @tool\(needs=\.\.\.\)\)"):
        needed({"clock": object()}, "memories", asker)
