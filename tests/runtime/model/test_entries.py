"""A thread's entries round-trip through the one adapter."""

from __future__ import annotations

from runtime import AssistantTurn, Entry, Notice, ToolResult, UserMessage
from runtime.model.entries import ENTRY, ToolCall


def test_entries_round_trip_through_one_adapter() -> None:
    entries: list[Entry] = [
        UserMessage(run_id="r", text="héllo", user="U1"),
        AssistantTurn(run_id="r", text="", tool_calls=(ToolCall(id="c", name="f",
                                                                arguments={"x": [1]}),)),
        ToolResult(run_id="r", tool_call_id="c", name="f", content={"ok": True}),
        Notice(run_id="r", code="final_turn", text="last"),
    ]
    for entry in entries:
        assert ENTRY.validate_json(ENTRY.dump_json(entry)) == entry
