"""fit_history: the newest history that fits, tested with tables."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from runtime import AssistantTurn, Notice, ToolResult, UserMessage
from runtime.engine.context import fit_history
from runtime.model.entries import ToolCall
from runtime.model.tokens import entry_tokens
from runtime.model.toolspec import ToolSpec

SIZE = 10
"""Every entry the tables build costs exactly this many estimated tokens."""


def _pad(make: Any, tokens: int) -> Any:
    base = entry_tokens(make(""))
    assert base <= tokens, (base, tokens)
    return make("x" * 4 * (tokens - base))  # 4 more characters, 1 more token


def build(spec: str) -> list[Any]:
    """``"U A C2 R R N"``: user, answer, a turn with 2 calls, their results, a notice."""
    entries: list[Any] = []
    pending: list[str] = []
    counter = itertools.count()
    for word in spec.split():
        if word == "U":
            entries.append(_pad(lambda t: UserMessage(run_id="r", text=t), SIZE))
        elif word == "A":
            entries.append(_pad(lambda t: AssistantTurn(run_id="r", text=t), SIZE))
        elif word == "N":
            entries.append(_pad(lambda t: Notice(run_id="r", code="n", text=t), SIZE))
        elif word.startswith("C"):
            calls = tuple(ToolCall(id=f"c{next(counter)}", name="t")
                          for _ in range(int(word[1:])))
            pending.extend(c.id for c in calls)
            entries.append(_pad(lambda t, c=calls: AssistantTurn(run_id="r", text=t,
                                                                 tool_calls=c), SIZE))
        elif word == "R":
            call_id = pending.pop(0) if pending else "orphan"
            entries.append(_pad(lambda t, i=call_id: ToolResult(
                run_id="r", tool_call_id=i, name="t", content=t), SIZE))
        else:
            raise ValueError(word)
    return entries


def kinds(entries: list[Any]) -> str:
    names = {"user": "U", "notice": "N", "tool_result": "R"}
    return " ".join(names.get(e.kind) or (f"C{len(e.tool_calls)}" if e.tool_calls else "A")
                    for e in entries)


@pytest.mark.parametrize(("spec", "budget", "expected", "dropped"), [
    ("U A U A", None, "U A U A", 0),                 # no limit: everything
    ("U A U A", 100, "U A U A", 0),                  # it all fits
    ("U A U A", 40, "U A U A", 0),                   # exactly fits
    ("U A U A", 39, "U A", 2),                       # the newest suffix that fits...
    ("U A U A", 30, "U A", 2),                       # ...then on to a user message
    ("U A U A", 20, "U A", 2),
    ("U A U A", 15, "A", 3),                         # no user message in it: kept as is
    ("U A", 5, "A", 1),                              # not even one fits: the newest goes anyway
    ("U C1 R A", 25, "A", 3),                        # a call and its result go together...
    ("U C1 R A", 30, "C1 R A", 1),                   # ...or not at all
    ("U C2 R R A", 39, "A", 4),
    ("U C2 R R A", 40, "C2 R R A", 1),
    ("U C2 R R", 25, "C2 R R", 1),                   # the newest unit is whole, even too big
    ("U C1 N R A", 40, "C1 N R A", 1),               # a notice among results stays inside
    ("U C1 R N U A", 30, "U A", 4),
    ("N U A U C1 R A", 60, "U A U C1 R A", 1),
    ("N U A U C1 R A", 50, "U C1 R A", 3),
    ("R U A", 100, "R U A", 0),                      # an orphan result is just an entry
    ("", 10, "", 0),
])
def test_fit_history(spec: str, budget: int | None, expected: str, dropped: int) -> None:
    entries = build(spec)
    kept, count = fit_history(entries, "", budget)
    assert (kinds(kept), count) == (expected, dropped)
    assert kept == entries[count:]  # always a suffix: the store's order, nothing rewritten


@pytest.mark.parametrize(("system", "tools", "budget", "expected"), [
    ("", (), 40, "U A U A"),
    ("s" * 40, (), 40, "U A"),                       # the system prompt takes 10
    ("s" * 40, (), 50, "U A U A"),
    ("", (ToolSpec("t", "d" * 30, {"type": "object"}),), 40, "U A"),  # tool specs count too
])
def test_system_prompt_and_tools_use_the_budget(system: str, tools: tuple[ToolSpec, ...],
                                                budget: int, expected: str) -> None:
    kept, _ = fit_history(build("U A U A"), system, budget, tools=tools)
    assert kinds(kept) == expected


def test_a_result_never_loses_its_call_at_any_budget() -> None:
    entries = build("U C2 R R A U C1 N R C3 R R R A U A N U C1 R")
    for budget in range(0, 260, 3):
        kept, dropped = fit_history(entries, "", budget)
        assert kept == entries[dropped:] and kept
        offered = {c.id for e in kept if isinstance(e, AssistantTurn) for c in e.tool_calls}
        answered = {e.tool_call_id for e in kept if isinstance(e, ToolResult)}
        assert answered <= offered and offered <= answered, budget
        assert isinstance(kept[0], UserMessage) or not any(
            isinstance(e, UserMessage) for e in kept[1:]), budget


def test_the_window_holds_its_start_until_it_must_move() -> None:
    from runtime.engine.context import Window

    window = Window(refit=0.6)
    thread = build("U A " * 4)  # 80 tokens: fits in 100
    starts = []
    for _ in range(8):
        sent, dropped = window.fit(thread, "", 100)
        assert sum(entry_tokens(e) for e in sent) <= 100
        assert dropped == 0 or isinstance(thread[dropped], UserMessage)
        starts.append(dropped)
        thread = thread + build("U A")  # the conversation goes on
    # No trimming while it fits; then a cut that leaves room (60 of 100 tokens), kept for
    # the next turns (a prompt cache can reuse it), and moved again only when full.
    assert starts == [0, 0, 6, 6, 6, 12, 12, 12]
    fresh, dropped = Window(refit=0.6).fit(thread, "", None)
    assert dropped == 0 and len(fresh) == len(thread)
