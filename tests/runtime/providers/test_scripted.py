"""The scripted model (runtime/providers/scripted.py), a model with teeth: the turn played
is the thread's count of assistant turns, every request recorded, running past the end an
error, a turn never played caught by ``assert_complete``; scripts loaded from JSON with
errors that name the file and the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    AssistantTurn,
    ConfigError,
    ModelRequest,
    ProviderError,
    ScriptedProvider,
    UserMessage,
)
from runtime.errors import ScriptExhausted
from runtime.model.entries import ToolCall


def _asked(turns_so_far: int) -> ModelRequest:
    entries: list[Any] = [UserMessage(run_id="r", text="hi")]
    entries += [AssistantTurn(run_id="r", text=f"turn {i}") for i in range(turns_so_far)]
    return ModelRequest(system="", entries=entries)


async def test_the_turn_played_is_the_threads_count_of_answers() -> None:
    model = ScriptedProvider([{"text": "first"},
                              {"tool_calls": [{"name": "look", "arguments": {"q": 1}},
                                              {"name": "look", "id": "mine"}]}])
    second = await model.complete(_asked(1))
    assert second.tool_calls == (ToolCall(id="call_1_0", name="look", arguments={"q": 1}),
                                 ToolCall(id="mine", name="look", arguments={}))
    assert second.stop_reason == "tool_use" and second.model == "scripted"
    with pytest.raises(AssertionError, match=r"never played: \[0\]"):
        model.assert_complete()
    first = await model.complete(_asked(0))  # (a restarted process: from where it stands)
    assert (first.text, first.tool_calls, first.stop_reason) == ("first", (), "end_turn")
    model.assert_complete()
    assert [len(c.entries) for c in model.calls] == [2, 1]  # every request recorded


async def test_running_past_the_end_is_an_error() -> None:
    model = ScriptedProvider([{"text": "only"}])
    with pytest.raises(ScriptExhausted, match="the script has 1 turns and turn 2 was asked"):
        await model.complete(_asked(1))
    assert len(model.calls) == 1


async def test_an_error_turn_is_the_providers_error() -> None:
    model = ScriptedProvider([{"error": "overloaded"}])
    with pytest.raises(ProviderError, match="overloaded"):
        await model.complete(_asked(0))
    model.assert_complete()  # played, if badly


async def test_text_is_streamed_in_its_pieces() -> None:
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    model = ScriptedProvider([{"text": "abcdefg", "chunks": 3}, {"text": "ab", "chunks": 5}])
    assert (await model.complete(_asked(0), on_text)).text == "abcdefg"
    assert pieces == ["abc", "def", "g"]
    pieces.clear()
    await model.complete(_asked(1), on_text)
    assert pieces == ["a", "b"]  # fewer for a short text


@pytest.mark.parametrize("script", [[{"text": "hi"}], {"turns": [{"text": "hi"}]}])
def test_a_script_from_a_file(tmp_path: Path, script: Any) -> None:
    (tmp_path / "s.json").write_text(json.dumps(script))
    model = ScriptedProvider.from_file(tmp_path / "s.json")
    assert [t.text for t in model.turns] == ["hi"]


@pytest.mark.parametrize(("content", "reason"), [
    (None, "No such file"),
    ("[{", "Expecting"),
    ('{"steps": []}', "valid list"),
    ('[{"text": "ok"}, {"text": 5}]', "turn 1.text: Input should be a valid string"),
    ('[{"txt": "typo"}]', "turn 0.txt: Extra inputs are not permitted"),
])
def test_a_script_that_cannot_be_played_is_a_config_error(
        tmp_path: Path, content: str | None, reason: str) -> None:
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        ScriptedProvider.from_file(path)
    (key, problem), = refused.value.problems
    assert key == "provider.script" and problem.startswith(f"{path}: ")
    assert reason in problem
