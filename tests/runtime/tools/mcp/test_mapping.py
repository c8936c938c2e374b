"""From MCP to maiden and back, without a server (runtime/tools/mcp/mapping.py): tool
names providers accept, effect classes from annotations, the allowlist, results for
the model."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from runtime import ToolImage
from runtime.tools.mcp import McpServerConfig, effect_from_hints, tool_name
from runtime.tools.mcp.mapping import MAX_NAME, error_text, result_content, select_tools


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("srv", "echo", "srv__echo"),
        ("git-hub", "create_issue", "git-hub__create_issue"),
        ("fs", "files.read/all", "fs__files_read_all"),  # what providers accept
    ],
)
def test_tool_names(server: str, tool: str, expected: str) -> None:
    assert tool_name(server, tool) == expected


def test_long_tool_names_are_cut_and_stay_apart() -> None:
    a, b = tool_name("srv", "x" * 80 + "a"), tool_name("srv", "x" * 80 + "b")
    assert len(a) == len(b) == MAX_NAME and a != b


@pytest.mark.parametrize(
    ("read_only", "destructive", "idempotent", "effect"),
    [
        (True, None, None, "read_only"),
        (True, True, False, "read_only"),
        (None, False, True, "idempotent_write"),
        (False, False, True, "idempotent_write"),
        (None, None, True, "non_idempotent"),  # destructive by the spec's default
        (None, True, True, "non_idempotent"),
        (None, False, None, "non_idempotent"),
        (None, None, None, "non_idempotent"),
        (False, None, False, "non_idempotent"),
    ],
)
def test_effect_classes_from_annotations(
    read_only: bool | None, destructive: bool | None, idempotent: bool | None, effect: str
) -> None:
    assert effect_from_hints(read_only, destructive, idempotent) == effect


def test_allowlist_and_notes_on_unknown_tools() -> None:
    cfg = McpServerConfig(name="s", command="x", tools=["a", "gone"], effects={"b": "read_only"},
                          approval={"nope": True})
    chosen, notes = select_tools(cfg, ["a", "b", "c"])
    assert chosen == ["a"]
    assert notes == ["tools lists gone, which the server does not offer",
                     "approval names nope, which the server does not offer"]
    everything, none = select_tools(McpServerConfig(name="s", command="x"), ["a", "b"])
    assert everything == ["a", "b"] and none == []


def text(*parts: str, is_error: bool = False, structured: Any = None) -> Any:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=p) for p in parts], is_error=is_error,
        structured_content=structured)


def test_results_for_the_model() -> None:
    assert result_content(text("hello")) == "hello"
    assert result_content(text("a", "b", structured={"x": 1})) == "a\nb"
    assert result_content(text(structured={"x": 1})) == {"x": 1}
    assert result_content(text()) == ""
    mixed = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(text="a chart:"),
        mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
        mcp_types.ImageContent(data="AAAA", mime_type="image/bmp")])
    assert result_content(mixed) == [
        {"type": "text", "text": "a chart:"}, ToolImage("image/png", b"\x00\x00\x00"),
        {"type": "image", "mime_type": "image/bmp", "note": "3 bytes of image data, not shown"}]
    assert error_text(text("disk full", is_error=True)) == "disk full"
    assert error_text(text(is_error=True)) == "the tool reported an error without a message"
