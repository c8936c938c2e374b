"""The guards (runtime/model/guards.py) by tables: repeated calls, the turn budget, message length,
call keys; and the idempotency key."""

from __future__ import annotations

import pytest

from runtime.model.entries import ToolCall
from runtime.model.guards import call_key, canonical_json, is_repeat, too_long, turn_budget
from runtime.model.runs import idempotency_key


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
    def made(name: str, i: int) -> ToolCall:  # the same name and arguments: the same call
        return ToolCall(id=f"call_{i}", name=name, arguments={"q": 1})

    calls = [made(name, i) for i, name in enumerate(previous)]
    assert is_repeat(calls, made("a", len(previous)), limit) is expected
    # Arguments tell calls apart too.
    other = ToolCall(id="call_x", name="a", arguments={"q": 2})
    assert not is_repeat(calls, other, limit)


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
