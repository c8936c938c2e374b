"""Tools from functions: the schema from type hints, and definitions refused."""

from __future__ import annotations

import gc
import threading
from typing import Annotated, Any

import pytest
from pydantic import Field

from runtime import ToolContext, ToolDefinitionError, ToolRegistry, tool
from runtime.tools.base import CancelFlag, ToolFile, split_files


def test_tool_schema_from_type_hints() -> None:
    @tool(effect="idempotent_write", requires_approval=True, timeout_s=3)
    async def create_ticket(
        ctx: ToolContext,
        title: Annotated[str, Field(description="one line")],
        priority: int = 3,
        tags: list[str] | None = None,
    ) -> dict[str, str]:
        """Open a ticket.

        Longer text that the model does not need.
        """
        return {}

    assert create_ticket.name == "create_ticket"
    assert create_ticket.description == "Open a ticket."
    assert (create_ticket.effect, create_ticket.requires_approval, create_ticket.timeout_s) == (
        "idempotent_write", True, 3)
    params = create_ticket.spec.parameters
    assert params["required"] == ["title"]
    assert set(params["properties"]) == {"title", "priority", "tags"}
    assert params["properties"]["title"] == {"description": "one line", "type": "string"}
    assert params["properties"]["priority"]["default"] == 3
    assert create_ticket.validate({"title": "t"}) == {"title": "t", "priority": 3, "tags": None}
    with pytest.raises(ValueError, match="priority"):
        create_ticket.validate({"title": "t", "priority": "high"})


def test_bad_tool_definitions() -> None:
    def star(*args: int) -> None: ...

    not_an_effect: Any = "sometimes"  # Any: the runtime check is what is tested

    with pytest.raises(ToolDefinitionError, match="args"):
        tool(star)
    with pytest.raises(ToolDefinitionError, match="effect"):
        tool(effect=not_an_effect)(lambda: None)

    @tool
    def clock() -> str:
        return "x"

    @tool(name="clock")
    def other() -> str:
        return "y"

    with pytest.raises(ToolDefinitionError, match="two tools"):
        ToolRegistry([clock, other])


def test_a_cancel_flag_waits_until_it_is_set_and_wakes_every_waiter() -> None:
    flag = CancelFlag()
    assert not flag.is_set() and flag.wait(0) is False and flag.wait(0.01) is False
    woke: list[bool] = []
    waiters = [threading.Thread(target=lambda: woke.append(flag.wait(10))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    flag.set()
    flag.set()  # a second set changes nothing
    for waiter in waiters:
        waiter.join(10)
    assert woke == [True, True, True] and flag.is_set() and flag.wait() is True


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
