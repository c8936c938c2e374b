"""What both HTTP wire formats need of a history (runtime/providers/wire.py): every call
answered right after the turn that made it, a result only with its call, notices as
user-role text; tool arguments parsed, or kept raw for the model to correct."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import AssistantTurn, Notice, ToolResult, UserMessage
from runtime.model.attachments import FileRef
from runtime.model.attachments.parts import TextPart
from runtime.model.entries import RUN_FAILED, Entry, ToolCall
from runtime.providers.wire import notice_text, pair_results, part_for, result_text, tool_arguments


def _user(text: str) -> UserMessage:
    return UserMessage(run_id="r", text=text, at=1.0)


def _turn(*calls: str, text: str = "") -> AssistantTurn:
    return AssistantTurn(run_id="r", text=text, at=1.0,
                         tool_calls=tuple(ToolCall(id=c, name="look") for c in calls))


def _result(call: str, content: Any = "ok") -> ToolResult:
    return ToolResult(run_id="r", tool_call_id=call, name="look", content=content, at=1.0)


def _notice(text: str, code: str = "note") -> Notice:
    return Notice(run_id="r", code=code, text=text, at=1.0)


def _shape(entries: list[Entry]) -> list[str]:
    """Each entry as ``kind:what`` (a result's call, a notice's code, a turn's calls)."""
    def one(e: Entry) -> str:
        if isinstance(e, ToolResult):
            return f"result:{e.tool_call_id}" + (":error" if e.is_error else "")
        if isinstance(e, AssistantTurn):
            return "turn:" + (",".join(c.id for c in e.tool_calls) or e.text)
        if isinstance(e, Notice):
            return f"notice:{e.code}"
        return f"user:{e.text}"
    return [one(e) for e in entries]


@pytest.mark.parametrize(("entries", "sent"), [
    # A history that obeys the rules goes as it is.
    ([_user("hi"), _turn("a", "b"), _result("a"), _result("b"), _turn(text="done")],
     ["user:hi", "turn:a,b", "result:a", "result:b", "turn:done"]),
    # Results that came out of order (or with a notice between) follow their turn.
    ([_turn("a", "b"), _notice("final turn"), _result("b"), _result("a")],
     ["turn:a,b", "result:b", "result:a", "notice:note"]),
    # A call with no result gets a cancelled one, before what came after.
    ([_turn("a"), _user("next")], ["turn:a", "result:a:error", "user:next"]),
    ([_turn("a", "b"), _result("b")], ["turn:a,b", "result:b", "result:a:error"]),
    # A result whose call was cut off the history becomes a notice.
    ([_result("gone"), _user("hi")], ["notice:orphan_result", "user:hi"]),
    ([_turn("a"), _result("gone"), _result("a")],
     ["turn:a", "result:a", "notice:orphan_result"]),
    # Empty assistant turns are left out.
    ([_user("hi"), _turn(), _turn(text="ok")], ["user:hi", "turn:ok"]),
    # A failed run's closing notice is a turn of its own; at the very end it is left out.
    ([_user("hi"), _notice("failed", RUN_FAILED), _user("again")],
     ["user:hi", "turn:[notice] failed", "user:again"]),
    ([_user("hi"), _notice("failed", RUN_FAILED)], ["user:hi"]),
    ([_turn("a"), _result("a"), _notice("failed", RUN_FAILED), _user("again")],
     ["turn:a", "result:a", "turn:[notice] failed", "user:again"]),
    ([], []),
])
def test_pair_results(entries: list[Entry], sent: list[str]) -> None:
    assert _shape(pair_results(entries)) == sent


def test_what_is_made_up_says_what_happened() -> None:
    missing, = [e for e in pair_results([_turn("a"), _user("next")])
                if isinstance(e, ToolResult)]
    assert missing.content == {"error": {"type": "cancelled",
                                         "message": "no result was recorded for this call"}}
    orphan = pair_results([ToolResult(run_id="r", tool_call_id="x", name="clock",
                                      content={"tz": "UTC"})])[0]
    assert isinstance(orphan, Notice)
    assert orphan.text == 'an earlier call to clock returned: {"tz": "UTC"}'


@pytest.mark.parametrize(("raw", "parsed"), [
    ('{"q": "x"}', {"q": "x"}), ("", {}), ("   ", {}), ("[1, 2]", [1, 2]),
    ('{"q": ', '{"q": '), ("not json", "not json"),
])
def test_tool_arguments(raw: str, parsed: Any) -> None:
    assert tool_arguments(raw) == parsed


@pytest.mark.parametrize(("content", "text"), [
    ("plain", "plain"), ({"café": 1}, '{"café": 1}'), ([1, None], "[1, null]"),
    (None, "null"),
])
def test_result_text(content: Any, text: str) -> None:
    assert result_text(content) == text


def test_a_notice_is_marked_as_the_runtimes() -> None:
    assert notice_text(_notice("answer now")) == "[notice] answer now"


def test_a_file_without_its_part_is_named_in_a_line() -> None:
    ref = FileRef(name="a.txt", media_type="text/plain", size=5, digest="ab" * 32)
    own = TextPart(ref, "hello")
    assert part_for(ref, {ref.digest: own}) is own
    for files in (None, {}, {"cd" * 32: own}):
        line = part_for(ref, files)
        assert isinstance(line, TextPart) and line.how == "note"
        assert line.text == f"[file {ref.describe()}]"
