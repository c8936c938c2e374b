"""A run as the memories see it (runtime/model/recollection.py): tables, no I/O."""

from __future__ import annotations

import calendar

import pytest

from runtime import Origin
from runtime.errors import MemoryRefused
from runtime.model.memories import (
    Memory,
    PersonScope,
    PlaceScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    visible,
)
from runtime.model.recollection import (
    forget_refusal,
    here_of,
    provenance_of,
    recalled_text,
    scope_of,
    source_words,
    writer_of,
)

AT = float(calendar.timegm((2026, 12, 3, 10, 0, 0)))
C1 = Origin(channel="slack", user="U1", place=("C1",), rights=("talk",))
DM = Origin(channel="slack", user="U1", place=("D1",), direct=True, rights=("talk",))
SECRET = Origin(channel="slack", user="U1", place=("C7",), private=True)
THREADED = Origin(channel="discord", user="42", place=("900", "800", "700"))
CLI = Origin(channel="cli", rights=("talk", "approve", "operate"))


@pytest.mark.parametrize(("origin", "place", "within", "private", "me"), [
    (C1, "C1", (), False, "slack:U1"),
    (DM, "D1", (), True, "slack:U1"),  # a DM is private
    (SECRET, "C7", (), True, "slack:U1"),  # so is a private channel
    (THREADED, "900", ("800", "700"), False, "discord:42"),  # a thread, its channel, guild
    (CLI, None, (), False, None),  # no place, no person
])
def test_here_and_provenance_of_a_run(origin: Origin, place: str | None,
                                      within: tuple[str, ...], private: bool,
                                      me: str | None) -> None:
    here = here_of(origin, thread_id="t", agent="a", people=["slack:U2"], at=AT)
    assert (here.place, here.within, here.private) == (place, within, private)
    assert here.people == frozenset(["slack:U2", *([me] if me else [])])
    source = provenance_of(origin, thread_id="t", run_id="r", at=AT)
    assert (source.user, source.place, source.private, source.channel) == (
        me, place, private, origin.channel)


def test_the_scope_a_call_names() -> None:
    source = provenance_of(C1, thread_id="t", run_id="r", at=AT)
    assert scope_of("thread", source, "a") == ThreadScope(thread_id="t")
    assert scope_of("place", source, "a") == PlaceScope(channel="slack", place="C1")
    assert scope_of("person", source, "a") == PersonScope(user="slack:U1")
    assert scope_of("workspace", source, "a") == WorkspaceScope()
    secret = provenance_of(SECRET, thread_id="t", run_id="r", at=AT)
    assert scope_of("place", secret, "a") == PlaceScope(channel="slack", place="C7",
                                                        private=True)
    nowhere = provenance_of(CLI, thread_id="t", run_id="r", at=AT)
    for kind in ("place", "person"):
        with pytest.raises(MemoryRefused):
            scope_of(kind, nowhere, "a")
    assert writer_of(CLI, "a", ["thread"]).rights == {"talk", "approve", "operate"}


def memory(text: str = "Deploys on Tuesdays", *, scope: object = None,
           source: Provenance | None = None) -> Memory:
    source = source or provenance_of(C1, thread_id="t", run_id="r", at=AT)
    return Memory(id="m1", text=text, scope=scope or PlaceScope(channel="slack", place="C1"),
                  provenance=source, created_at=AT, updated_at=AT)


@pytest.mark.parametrize(("origin", "scope", "allowed"), [
    (C1, None, True),  # who said it
    (Origin(channel="slack", user="U2", place=("C1",)), None, False),  # someone else
    (Origin(channel="slack", user="U2", place=("C1",), rights=("operate",)), None, True),
    (Origin(channel="discord", user="U1", place=("C1",)), None, False),  # another U1
    (Origin(channel="slack", user="U2", place=("C1",)), PersonScope(user="slack:U2"),
     True),  # the person it is about
    (CLI, None, True),  # the operator's terminal
])
def test_who_may_forget(origin: Origin, scope: object, allowed: bool) -> None:
    assert (forget_refusal(memory(scope=scope), origin) is None) is allowed


def test_a_source_in_words() -> None:
    assert source_words(memory()) == "slack:U1, slack #C1, 3 Dec 2026"
    dm = provenance_of(DM, thread_id="t", run_id="r", at=AT)
    assert source_words(memory(source=dm)) == "slack:U1, a private slack conversation (D1), " \
                                              "3 Dec 2026"
    cli = provenance_of(CLI, thread_id="t9", run_id="r", at=AT)
    assert source_words(memory(source=cli)) == "someone, cli thread t9, 3 Dec 2026"
    named = memory().provenance.model_copy(update={"user_name": "Ana"})
    assert source_words(memory(source=named)) == "Ana, slack #C1, 3 Dec 2026"


def test_a_recalled_block_keeps_to_its_tokens() -> None:
    short, long = memory("short"), memory("x" * 400).model_copy(update={"id": "m2"})
    whole = recalled_text([long, short], 1_000)
    assert whole is not None and "[m2]" in whole and "[m1] short (slack:U1" in whole
    assert whole.index("[m2]") < whole.index("[m1]")  # best first
    some = recalled_text([long, short], 90)  # the long one does not fit; the next does
    assert some is not None and "[m1]" in some and "[m2]" not in some
    assert recalled_text([long], 90) is None and recalled_text([], 1_000) is None


def test_a_dm_memory_is_not_visible_in_a_channel() -> None:
    """What the pieces make together, as ``visible`` judges it."""
    dm = provenance_of(DM, thread_id="dm", run_id="r", at=AT)
    kept = memory(scope=PersonScope(user="slack:U1"), source=dm)
    assert visible(kept, here_of(DM, thread_id="dm", agent="a", people=[], at=AT))
    assert not visible(kept, here_of(C1, thread_id="c", agent="a", people=[], at=AT))
