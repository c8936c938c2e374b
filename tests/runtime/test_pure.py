"""Pure logic, by tables: run transitions, guards, echo commands, tool schemas."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from runtime import (
    ENTRY,
    AssistantTurn,
    Entry,
    IllegalTransition,
    Notice,
    Run,
    RunState,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    ToolResult,
    UserMessage,
    idempotency_key,
    tool,
)
from runtime.guards import call_key, canonical_json, is_repeat, too_long, turn_budget
from runtime.providers.echo import parse_tool_command
from runtime.runs import transition

S = RunState
ALLOWED = {
    (S.QUEUED, S.RUNNING), (S.QUEUED, S.FAILED), (S.QUEUED, S.CANCELLED),
    (S.RUNNING, S.RUNNING), (S.RUNNING, S.AWAITING_TOOL), (S.RUNNING, S.AWAITING_APPROVAL),
    (S.RUNNING, S.COMPLETED), (S.RUNNING, S.FAILED), (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.TIMED_OUT),
    (S.AWAITING_TOOL, S.RUNNING), (S.AWAITING_TOOL, S.AWAITING_APPROVAL),
    (S.AWAITING_TOOL, S.FAILED), (S.AWAITING_TOOL, S.CANCELLED), (S.AWAITING_TOOL, S.TIMED_OUT),
    (S.AWAITING_APPROVAL, S.RUNNING), (S.AWAITING_APPROVAL, S.AWAITING_TOOL),
    (S.AWAITING_APPROVAL, S.FAILED), (S.AWAITING_APPROVAL, S.CANCELLED),
    (S.AWAITING_APPROVAL, S.TIMED_OUT),
    (S.FAILED, S.QUEUED), (S.CANCELLED, S.QUEUED), (S.TIMED_OUT, S.QUEUED),
}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transition_table(source: RunState, target: RunState) -> None:
    run = Run(id="r" * 32, thread_id="t", text="hi", state=source)
    if (source, target) in ALLOWED:
        moved, step = transition(run, target, "because", now=5.0)
        assert moved.state is target and moved.reason == "because"
        assert (step.source, step.target, step.reason, step.at) == (source, target, "because", 5.0)
    else:
        with pytest.raises(IllegalTransition):
            transition(run, target, "because")


def test_completed_is_final() -> None:
    run = Run(id="r" * 32, thread_id="t", text="hi", state=S.COMPLETED)
    assert run.terminal
    for target in S:
        with pytest.raises(IllegalTransition):
            transition(run, target, "x")


@pytest.mark.parametrize(
    ("previous", "limit", "expected"),
    [
        ([], 3, False),
        (["a"], 3, False),
        (["a", "a"], 3, True),
        (["b", "a", "a"], 3, True),
        (["a", "b", "a"], 3, False),
        (["a"], 2, True),
        (["b"], 2, False),
        (["a", "a", "a"], 5, False),
        (["a", "a", "a", "a"], 5, True),
    ],
)
def test_is_repeat(previous: list[str], limit: int, expected: bool) -> None:
    assert is_repeat(previous, "a", limit) is expected


@pytest.mark.parametrize(
    ("taken", "max_turns", "expected"),
    [(0, 3, "ok"), (1, 3, "ok"), (2, 3, "final"), (3, 3, "exceeded"), (0, 1, "final"),
     (5, 3, "exceeded")],
)
def test_turn_budget(taken: int, max_turns: int, expected: str) -> None:
    assert turn_budget(taken, max_turns) == expected


@pytest.mark.parametrize(
    ("length", "limit", "expected"),
    [(20, 20, None), (0, 20, None),
     (21, 20, "it has 21 characters and the limit is 20."),
     (120_000, 100_000, "it has 120,000 characters and the limit is 100,000.")],
)
def test_too_long_names_the_length_and_the_limit(length: int, limit: int,
                                                 expected: str | None) -> None:
    said = too_long(length, limit)
    assert said is None if expected is None else (said is not None and expected in said)


def test_call_key_is_canonical() -> None:
    assert call_key("f", {"a": 1, "b": [1, 2]}) == call_key("f", {"b": [1, 2], "a": 1})
    assert call_key("f", {"a": 1}) != call_key("g", {"a": 1})
    assert call_key("f", {"a": 1}) != call_key("f", {"a": "1"})
    assert canonical_json({"é": 1, "a": None}) == '{"a":null,"é":1}'


def test_idempotency_key_is_sha256_of_run_and_call() -> None:
    import hashlib

    assert idempotency_key("run1", "call1") == hashlib.sha256(b"run1call1").hexdigest()


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
