"""Tools from functions (the schema from type hints) and from a JSON schema, definitions
refused, and the flag a call given up sets."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import pytest
from pydantic import Field

from runtime import Tool, ToolContext, ToolDefinitionError, tool
from runtime.tools.base import CancelFlag


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


async def test_a_schema_tool() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def call(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        seen.append((ctx.idempotency_key, arguments))
        return {"ok": True}

    made = Tool.from_schema("srv__x", "Does x.", {"title": "T", "type": "object"}, call,
                            effect="idempotent_write", requires_approval=True, timeout_s=3)
    assert made.spec.parameters == {"title": "T", "type": "object", "properties": {}}
    assert (made.effect, made.requires_approval, made.timeout_s) == ("idempotent_write", True, 3)
    assert made.validate({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="must be a JSON object, got an array"):
        made.validate([1])
    assert not made.with_approval(False).requires_approval
    result = await made.invoke(ToolContext("r", "t", "c", "key"), {"a": 1})
    assert result == {"ok": True} and seen == [("key", {"a": 1})]
