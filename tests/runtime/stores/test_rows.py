"""The rows the SQL stores write and read (runtime/stores/rows.py), pure: entry rows with
the thread's running token sum, appended only where the thread stands; a run's row and its
read back; the one statement that sums what each spend cap asks."""

from __future__ import annotations

import pytest

from runtime import Notice, Origin, Run, ToolResult, UserMessage
from runtime.errors import CorruptStore, StaleWrite
from runtime.model.tokens import entry_tokens
from runtime.stores.base import SpendAsk
from runtime.stores.rows import (
    entry_row,
    parse_run,
    positioned_rows,
    run_json,
    since_id,
    spend_key,
    spend_sql,
    spend_sums,
)
from tests.runtime.stores.contract import make_run


def test_a_run_row_written_here_reads_back_as_the_run_written() -> None:
    """The SQL stores' rows: a row this process wrote is not parsed again (its text decides
    the run); any other text is."""
    run = make_run("t")
    data = run_json(run)
    assert parse_run(data) is run
    other = parse_run(data.replace('"thread_id":"t"', '"thread_id":"u"'))
    assert other.thread_id == "u" and other.id == run.id


def test_a_run_row_holds_only_the_fields_set_and_a_bad_one_is_corrupt() -> None:
    run = Run(id="r1", thread_id="t", text="hi", created_at=1.0, updated_at=1.0)
    assert run_json(run) == '{"id":"r1","thread_id":"t","text":"hi","created_at":1.0,' \
                            '"updated_at":1.0}'
    with pytest.raises(CorruptStore, match="unreadable run row"):
        parse_run('{"id": "r1"}')
    with pytest.raises(CorruptStore, match="unreadable run row"):
        parse_run("not json")


def test_an_entry_row_names_its_call_and_its_kind() -> None:
    result = ToolResult(run_id="r", tool_call_id="c1", name="look", content="ok")
    row = entry_row("t", 4, result)
    assert row[:5] == ("t", 4, "r", "tool_result", "c1")
    assert row[5] == result.model_dump_json() and row[6] == entry_tokens(result)
    summary = Notice(run_id="r", code="summary", text="so far")
    assert entry_row("t", 5, summary)[3:5] == ("summary", None)  # a kind of its own
    assert entry_row("t", 6, Notice(run_id="r", code="x", text="y"))[3] == "notice"


def test_rows_are_appended_where_the_thread_stands_with_its_running_sum() -> None:
    rows = [entry_row("t", n, UserMessage(run_id="r", text="x" * 8)) for n in (3, 4)]
    own = rows[0][-1]
    assert [r[-1] for r in positioned_rows("t", 3, rows, (2, 100), known=True)] == [
        100 + own, 100 + 2 * own]
    assert positioned_rows("t", 0, rows[:1], None, known=True)[0][-1] == own  # a new thread
    for position, last, known in ((2, (2, 100), True),  # it moved past that position
                                  (4, (2, 100), True),  # a gap
                                  (0, None, False)):  # a thread erased meanwhile
        with pytest.raises(StaleWrite, match=f"thread 't' moved past position {position}"):
            positioned_rows("t", position, rows, last, known=known)


@pytest.mark.parametrize(("since", "lowest"), [
    (0.0, "000000000000"), (-5.0, "000000000000"), (1.0, "0000000003e8"),
    (1_764_849_600.5, f"{1_764_849_600_500:012x}"),
])
def test_since_id_is_the_lowest_id_of_a_run_made_then(since: float, lowest: str) -> None:
    assert since_id(since) == lowest


def test_one_statement_sums_every_ask_in_order() -> None:
    asks = [SpendAsk(1.0, "user", ("U1", "U2")), SpendAsk(2.0, "place", ("slack:C1",))]
    sql, params = spend_sql(asks, lambda n: f"${n}", also="now()")
    assert sql == (
        "SELECT 0, coalesce(sum(spend_tokens), 0), coalesce(sum(spend_cost), 0.0), now() "
        "FROM runs WHERE spend_user IN ($1, $2) AND id >= $3 UNION ALL "
        "SELECT 1, coalesce(sum(spend_tokens), 0), coalesce(sum(spend_cost), 0.0), now() "
        "FROM runs WHERE spend_place IN ($4) AND id >= $5")
    assert params == ["U1", "U2", since_id(1.0), "slack:C1", since_id(2.0)]
    assert spend_sums([(1, 30, 0.5, "x"), (0, 10, 0.25, "x")], 3) == [
        (10, 0.25), (30, 0.5), (0, 0.0)]


def test_a_runs_spend_keys() -> None:
    run = Run(id="r", thread_id="t", text="hi", agent="eng",
              origin=Origin(channel="discord", user="U1", place=("T9", "C2", "G1")))
    assert [spend_key(run, scope) for scope in ("agent", "user", "place")] == [
        "eng", "U1", "discord:C2"]  # a Discord thread's place: its parent channel
    assert spend_key(Run(id="r", thread_id="t", text="hi"), "user") is None
