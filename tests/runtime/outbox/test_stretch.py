"""How a run's stream ends before its reply or prompt (``runtime/outbox/stretch.py``,
``stream_ending``): what the stream showed decides whether the reply replaces it, is added
as a note, or is what it shows already."""

from __future__ import annotations

import pytest

from runtime.model.runs import ApprovalDelivery, ReplyDelivery, StreamDelivery
from runtime.outbox.stretch import WAITING_NOTE, Stretch, stream_ending

COMMON = {"run_id": "r", "thread_id": "t", "channel": "chat", "target": {"room": "1"}}
STREAM = StreamDelivery(key="s", **COMMON)
ANSWER = ReplyDelivery(key="a", text="The deploy is done.", **COMMON)
PROMPT = ApprovalDelivery(key="p", tool_call_id="c", name="deploy",
                          arguments_hash="h", reason="requires_approval", **COMMON)


def streamed(shown: str, *, pending: str = "", inert: bool = False,
             stream: StreamDelivery = STREAM) -> Stretch:
    """This process's stretch of the run: its stream showed ``shown``; ``pending``: text
    written but not appended yet (held back while the store did not take the ids)."""
    return Stretch(run_id="r", thread_id="t", inert=inert, streamed=shown,
                   text=[pending] if pending else [], stream=stream)


@pytest.mark.parametrize(("delivery", "live", "ending"), [
    # A prompt leaves what was streamed and says the run waits.
    (PROMPT, streamed("I will deploy."), (None, WAITING_NOTE)),
    (PROMPT, None, (None, WAITING_NOTE)),
    # The answer, streamed whole here: nothing to change.
    (ANSWER, streamed("The deploy is done."), (None, None)),
    # Closing words the stream did not show (a failure, a stop): said at its end.
    (ANSWER.model_copy(update={"text": "Sorry, I could not finish this."}),
     streamed("I will dep"), (None, "Sorry, I could not finish this.")),
    # Not streamed whole here: a crash cut it (another process, no stretch here), text
    # held back, a stream of an earlier life, or not streamed here at all.
    (ANSWER, None, ("The deploy is done.", None)),
    (ANSWER, streamed("The dep", pending="loy is done."), ("The deploy is done.", None)),
    (ANSWER, streamed("The deploy is done.", stream=STREAM.model_copy(update={"key": "old"})),
     ("The deploy is done.", None)),
    (ANSWER, streamed("", inert=True), ("The deploy is done.", None)),
])
def test_how_a_stream_ends_before_the_runs_reply_or_prompt(
        delivery: ReplyDelivery | ApprovalDelivery, live: Stretch | None,
        ending: tuple[str | None, str | None]) -> None:
    assert stream_ending(delivery, STREAM, live) == ending
