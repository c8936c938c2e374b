"""What makes a message a run (runtime/engine/intake.py), pure: refused before anything is
stored, by a table; a too long message from a chat taken (its run says why); a run holding
only the fields its message set."""

from __future__ import annotations

import pytest

from runtime import InvalidThreadId, Origin, RunError, RunState, Said
from runtime.engine.intake import new_run
from runtime.model.attachments import FileRef

CHAT = Origin(channel="slack", target={"channel": "C1"}, user="U1")
CLI = Origin(channel="cli")
REF = FileRef(name="a.txt", media_type="text/plain", size=3, digest="ab" * 32)


@pytest.mark.parametrize(("thread_id", "text", "origin", "error", "says"), [
    ("", "hi", None, InvalidThreadId, "cannot be empty"),
    ("a\nb", "hi", None, InvalidThreadId, "control characters"),
    ("a\ud800", "hi", None, InvalidThreadId, "not valid Unicode"),
    ("t", "", None, RunError, "the message is empty"),
    ("t", " \n\t", CHAT, RunError, "the message is empty"),
    ("t", "x" * 11, None, RunError, "the message has 11 characters; at most 10 are accepted"),
    ("t", "x" * 11, CLI, RunError, r"\[agent\] max_message_chars"),  # no target to answer
])
def test_a_message_that_cannot_be_a_run_is_refused(
        thread_id: str, text: str, origin: Origin | None, error: type[Exception],
        says: str) -> None:
    with pytest.raises(error, match=says) as refused:
        new_run(thread_id, text, origin, None, max_chars=10, now=1.0)
    if isinstance(refused.value, RunError):
        assert refused.value.reason == "invalid_message"


def test_a_long_message_from_a_chat_is_taken() -> None:
    run = new_run("t", "x" * 11, CHAT, None, max_chars=10, now=1.0)
    assert run.state is RunState.QUEUED and run.text == "x" * 11


def test_a_message_of_files_only_is_a_run() -> None:
    assert new_run("t", "", None, None, max_chars=10, now=1.0, files=(REF,)).files == (REF,)


def test_a_run_holds_only_the_fields_its_message_set() -> None:
    plain = new_run("t", "hi", None, None, max_chars=10, now=1_700_000_000.0)
    assert plain.model_fields_set == {"id", "thread_id", "text", "created_at", "updated_at"}
    assert plain.created_at == plain.updated_at == 1_700_000_000.0
    assert plain.id.startswith(f"{1_700_000_000_000:012x}")  # ids begin with their time
    full = new_run("t", "hi", CHAT, "slack:Ev1", max_chars=10, now=1.0, files=(REF,),
                   context=(Said(role="user", text="before"),), agent="eng")
    assert (full.origin, full.idempotency_key, full.files, full.agent) == (
        CHAT, "slack:Ev1", (REF,), "eng")
    assert full.context == (Said(role="user", text="before"),)
    assert new_run("t", "hi", None, None, max_chars=10, now=1.0).id != plain.id
