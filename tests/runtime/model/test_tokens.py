"""Token estimates (runtime/model/tokens.py): about four characters a token, a few more a
message, and what each kind of entry counts."""

from __future__ import annotations

import pytest

from runtime import AssistantTurn, Notice, ToolResult, UserMessage
from runtime.model.attachments import FileRef
from runtime.model.entries import ToolCall
from runtime.model.tokens import MESSAGE_OVERHEAD, entry_tokens, estimate_tokens


def _file(tokens: int) -> FileRef:
    return FileRef(name="shot.png", media_type="image/png", size=10, digest="ab" * 32,
                   tokens=tokens)


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2),
                                              ("x" * 400, 100)])
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_entry_tokens_count_calls_and_results() -> None:
    call = AssistantTurn(run_id="r", tool_calls=(ToolCall(id="c1", name="clock",
                                                          arguments={"tz": "UTC"}),))
    assert entry_tokens(call) == MESSAGE_OVERHEAD + estimate_tokens('c1clock{"tz": "UTC"}')
    result = ToolResult(run_id="r", tool_call_id="c1", name="clock", content={"ok": True})
    assert entry_tokens(result) == MESSAGE_OVERHEAD + estimate_tokens('c1{"ok": true}')


def test_an_answer_counts_its_text_and_every_call() -> None:
    calls = (ToolCall(id="c1", name="a", arguments={}),
             ToolCall(id="c2", name="b", arguments="not json"))  # kept as the model sent it
    turn = AssistantTurn(run_id="r", text="x" * 40, tool_calls=calls)
    assert entry_tokens(turn) == MESSAGE_OVERHEAD + estimate_tokens(
        "x" * 40 + "c1a{}" + "c2bnot json")
    assert entry_tokens(AssistantTurn(run_id="r")) == MESSAGE_OVERHEAD


def test_a_user_message_counts_its_text_and_its_files() -> None:
    plain = UserMessage(run_id="r", text="y" * 41)
    assert entry_tokens(plain) == MESSAGE_OVERHEAD + 11
    with_files = UserMessage(run_id="r", text="y" * 41, files=(_file(1000), _file(258)))
    assert entry_tokens(with_files) == MESSAGE_OVERHEAD + 11 + 1258


def test_a_result_counts_the_images_the_model_sees_not_the_files_it_hands_on() -> None:
    base = ToolResult(run_id="r", tool_call_id="c1", name="t", content="done")
    assert entry_tokens(base) == MESSAGE_OVERHEAD + estimate_tokens("c1done")
    shown = base.model_copy(update={"images": (_file(800),)})
    assert entry_tokens(shown) == entry_tokens(base) + 800
    handed_on = base.model_copy(update={"files": (_file(800),)})  # sent to the person
    assert entry_tokens(handed_on) == entry_tokens(base)


def test_a_notice_counts_its_marker() -> None:
    notice = Notice(run_id="r", code="final_turn", text="answer now")
    assert entry_tokens(notice) == MESSAGE_OVERHEAD + estimate_tokens("[notice] answer now")
