"""model_view: what the model is shown of an untidy thread, by table."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import AssistantTurn, Entry, Notice, ToolResult, UserMessage
from runtime.engine.history import model_view
from runtime.model.entries import LATE_RESULT, ToolCall


def user(run: str, text: str = "") -> UserMessage:
    return UserMessage(run_id=run, text=text or f"message of {run}")


def calls(run: str, *ids: str) -> AssistantTurn:
    return AssistantTurn(run_id=run, tool_calls=tuple(ToolCall(id=i, name=f"t{i}")
                                                      for i in ids))


def answer(run: str) -> AssistantTurn:
    return AssistantTurn(run_id=run, text=f"answer of {run}")


def result(run: str, call: str) -> ToolResult:
    return ToolResult(run_id=run, tool_call_id=call, name=f"t{call}", content="ok")


def shape(view: Any) -> list[str]:
    """Each entry as a word: U:r1, A:r1, C:c1+c2 (a turn's calls), R:c1 (its result; R!:c1
    made up for a call with none), N:r1 (a late-result notice)."""
    out = []
    for e in view:
        if isinstance(e, UserMessage):
            out.append(f"U:{e.run_id}")
        elif isinstance(e, AssistantTurn):
            out.append("C:" + "+".join(c.id for c in e.tool_calls) if e.tool_calls
                       else f"A:{e.run_id}")
        elif isinstance(e, ToolResult):
            out.append(("R!:" if e.is_error else "R:") + e.tool_call_id)
        else:
            assert isinstance(e, Notice)
            out.append(f"N:{e.run_id}" if e.code == LATE_RESULT else f"notice:{e.code}")
    return out


@pytest.mark.parametrize(("entries", "expected"), [
    # Decided after its run timed out, once r2 was answered: the result goes back beside
    # its call and a notice stands where it came, last.
    ([user("r1"), calls("r1", "c1"), user("r2"), answer("r2"), result("r1", "c1")],
     ["U:r1", "C:c1", "R:c1", "U:r2", "A:r2", "N:r1"]),
    # Its batch (two calls of one turn, one decided late) gets one notice; the run's
    # later turns follow it.
    ([user("r1"), calls("r1", "c1", "c2"), result("r1", "c1"), user("r2"), answer("r2"),
      result("r1", "c2"), calls("r1", "c3"), result("r1", "c3"), answer("r1")],
     ["U:r1", "C:c1+c2", "R:c1", "R:c2", "U:r2", "A:r2", "N:r1", "C:c3", "R:c3", "A:r1"]),
    ([user("r1"), calls("r1", "c1", "c2"), user("r2"), answer("r2"), result("r1", "c1"),
      result("r1", "c2")],
     ["U:r1", "C:c1+c2", "R:c1", "R:c2", "U:r2", "A:r2", "N:r1"]),
    # The thread did not go on (only the run's own entries between): nothing to say.
    ([user("r1"), calls("r1", "c1"), Notice(run_id="r1", code="x", text="x"),
      result("r1", "c1")],
     ["U:r1", "C:c1", "R:c1", "notice:x"]),
    # A call still waiting gets a made-up result, and no notice.
    ([user("r1"), calls("r1", "c1"), user("r2")], ["U:r1", "C:c1", "R!:c1", "U:r2"]),
    # Two runs waiting at once; the first, decided, answers; then the second is decided:
    # it went on after the first's entries, so its result gets a notice too.
    ([user("r1"), calls("r1", "c1"), user("r2"), calls("r2", "c2"), result("r1", "c1"),
      answer("r1"), result("r2", "c2"), answer("r2")],
     ["U:r1", "C:c1", "R:c1", "U:r2", "C:c2", "R:c2", "N:r1", "A:r1", "N:r2", "A:r2"]),
    # Two runs decided late, one after the other: a notice each.
    ([user("r1"), calls("r1", "c1"), user("r2"), calls("r2", "c2"), user("r3"),
      answer("r3"), result("r1", "c1"), answer("r1"), result("r2", "c2")],
     ["U:r1", "C:c1", "R:c1", "U:r2", "C:c2", "R:c2", "U:r3", "A:r3", "N:r1", "A:r1",
      "N:r2"]),
])
def test_a_late_result_leaves_a_notice_where_it_came(entries: list[Any],
                                                     expected: list[str]) -> None:
    assert shape(model_view(entries)) == expected


def test_the_notice_names_the_calls_and_quotes_the_runs_message() -> None:
    entries: list[Entry] = [user("r1", "ship the api"), calls("r1", "c1", "c2"), user("r2"),
                            answer("r2"), result("r1", "c1"), result("r1", "c2")]
    notice = model_view(entries)[-1]
    assert isinstance(notice, Notice) and notice.code == LATE_RESULT
    assert "your call to tc1, tc2 came only now" in notice.text
    assert notice.text.endswith('That message: "ship the api"')
    long: list[Entry] = [user("r1", "x" * 1000), *entries[1:]]
    notice = model_view(long)[-1]
    assert isinstance(notice, Notice) and notice.text.endswith('x…"')
    assert len(notice.text) < 600
