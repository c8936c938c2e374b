"""The tools a server lists, made maiden's (runtime/tools/mcp/listing.py): arguments
checked against the schema, tools that run only as tasks left out with a note."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from runtime import ToolContext
from runtime.tools.mcp import McpServerConfig
from runtime.tools.mcp.listing import argument_check, build_tools


def test_arguments_are_checked_against_the_schema() -> None:
    check = argument_check({"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]})
    assert check is not None
    check({"n": 3})
    with pytest.raises(ValueError, match="n: 'x' is not of type 'integer'"):
        check({"n": "x"})
    with pytest.raises(ValueError, match="arguments: 'n' is a required property"):
        check({})
    assert argument_check({"type": 12}) is None  # an invalid schema checks nothing



def test_tools_that_run_only_as_tasks_are_left_out_with_a_note() -> None:
    def listed(name: str, support: str | None) -> mcp_types.Tool:
        execution = None if support is None else mcp_types.ToolExecution(task_support=support)
        return mcp_types.Tool(name=name, input_schema={"type": "object"}, execution=execution)

    def call_for(name: str) -> Any:
        async def call(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
            return name
        return call

    tools = [listed("plain", None), listed("either", "optional"), listed("never", "forbidden"),
             listed("batch", "required"), listed("export", "required")]
    made, notes = build_tools(McpServerConfig(name="s", command="x"), tools, call_for)
    assert sorted(made) == ["s__either", "s__never", "s__plain"]
    assert notes == ['batch, export left out: they run only as an MCP task '
                     '(execution.taskSupport "required"), which maiden does not support']
    chosen = McpServerConfig(name="s", command="x", tools=["batch", "plain"])
    made, notes = build_tools(chosen, tools, call_for)
    assert list(made) == ["s__plain"]
    assert notes == ['batch left out: it runs only as an MCP task (execution.taskSupport '
                     '"required"), which maiden does not support']
