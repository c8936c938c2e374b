"""What each model request holds (runtime/engine/prompting.py): the thread cut to the
context window, a notice or the thread's summary standing for what is left out, the cut
held between turns, and the request that summarises what falls out."""

from __future__ import annotations

from typing import Any

from runtime import AssistantTurn, Notice, Run, UserMessage
from runtime.engine.prompting import COMPACTION_PROMPT, Prompts
from runtime.model.entries import Entry
from runtime.model.toolspec import ToolSpec

RUN = Run(id="r9", thread_id="t", text="go on")
TOOLS = (ToolSpec(name="look", description="Look.", parameters={"type": "object"}),)


def _thread(pairs: int) -> list[Entry]:
    """``pairs`` exchanges of about 100 tokens each."""
    entries: list[Entry] = []
    for n in range(pairs):
        entries += [UserMessage(run_id=f"r{n}", text=f"question {n} " + "x" * 200, at=n),
                    AssistantTurn(run_id=f"r{n}", text=f"answer {n} " + "y" * 200, at=n)]
    return entries


def _texts(entries: Any) -> list[str]:
    return [e.text.split(" x")[0].split(" y")[0] for e in entries]


def test_without_a_limit_the_whole_thread_is_sent() -> None:
    thread = _thread(3)
    request = Prompts("Be brief.").request(RUN, thread, TOOLS, final=True, limit=None,
                                           now=50.0)
    assert list(request.entries) == thread
    assert (request.system, tuple(request.tools), request.final_turn) == (
        "Be brief.", TOOLS, True)
    assert (request.run_id, request.thread_id) == ("r9", "t")


def test_what_the_window_leaves_out_is_told_in_a_notice() -> None:
    thread = _thread(10)
    request = Prompts("").request(RUN, thread, (), final=False, limit=500, now=50.0)
    notice, *kept = request.entries
    assert isinstance(notice, Notice) and notice.code == "context_trimmed" and notice.at == 50.0
    dropped = len(thread) - len(kept)
    assert 0 < dropped < len(thread)
    assert kept == thread[dropped:] and isinstance(kept[0], UserMessage)  # whole exchanges
    assert notice.text == (f"{dropped} older entries of this conversation were left out to "
                           "fit the context window.")


def test_a_summary_stands_for_what_it_covers() -> None:
    thread = _thread(10)
    summary = Notice(run_id="r4", code="summary", text="they talked of x and y", covers=20,
                     at=7.0)
    request = Prompts("").request(RUN, [*thread, summary], (), final=False, limit=500,
                                  now=50.0)
    first = request.entries[0]
    assert isinstance(first, Notice) and first.code == "summary" and first.at == 7.0
    assert first.text == "Summary of the earlier conversation: they talked of x and y"
    assert not any(isinstance(e, Notice) and e.code == "context_trimmed"
                   for e in request.entries)  # it covers all that was left out
    assert summary not in request.entries[1:]


def test_the_cut_is_held_between_turns_until_forgotten() -> None:
    prompts = Prompts("")
    thread = _thread(10)
    assert prompts.held_start("t") is None
    first = prompts.cut("t", thread, (), 500)
    assert prompts.held_start("t") == first.dropped > 0
    # One more exchange: the window keeps its start while what is sent still fits.
    grown = [*thread, *_thread(11)[20:21]]
    assert prompts.cut("t", grown, (), 500).dropped == first.dropped
    prompts.forget("t")
    assert prompts.held_start("t") is None


def test_what_falls_out_is_summarised_once() -> None:
    prompts = Prompts("")
    thread = _thread(10)
    assert prompts.compaction(RUN, thread, (), None) is None  # no window, nothing falls out
    made = prompts.compaction(RUN, thread, (), 500)
    assert made is not None
    request, covers, files = made.request, made.covers, made.files
    assert made.since == 0 and len(made.falling) == covers
    assert request.system == COMPACTION_PROMPT and request.final_turn and request.tools == ()
    (asked,) = request.entries
    assert isinstance(asked, UserMessage)
    assert "question 0" in asked.text and f"answer {covers // 2 - 1}" in asked.text
    assert f"question {covers // 2}" not in asked.text  # what is still sent is not summarised
    assert covers == prompts.cut("t", thread, (), 500).dropped and files == []
    summary = Notice(run_id="r9", code="summary", text="so far", covers=covers)
    assert prompts.compaction(RUN, [*thread, summary], (), 500) is None  # covered now


def test_what_a_summary_does_not_cover_is_told_in_a_notice_after_it() -> None:
    thread = _thread(10)
    summary = Notice(run_id="r1", code="summary", text="the first exchange", covers=2)
    request = Prompts("").request(RUN, [*thread, summary], (), final=False, limit=500,
                                  now=50.0)
    first, trimmed, *kept = request.entries
    assert isinstance(first, Notice) and first.code == "summary"
    dropped = len(thread) - len(kept)
    assert isinstance(trimmed, Notice) and trimmed.code == "context_trimmed"
    assert trimmed.text.startswith(f"{dropped - 2} older entries")
