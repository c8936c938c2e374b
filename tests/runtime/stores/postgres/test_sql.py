"""The PostgreSQL store's statements and values (runtime/stores/postgres/sql.py), pure:
text PostgreSQL cannot hold (NUL) written and read back unchanged, and the runs listing
that reads the partial index of active runs."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest

from runtime import RunState
from runtime.stores.postgres.sql import decode_text, encode_text, list_runs_sql, unreachable

S = RunState


@pytest.mark.parametrize("text", ["", "plain", "nul\x00inside", "\x01", "\x01\x01\x02",
                                  "\x00\x01\x00\x02", "é\x00日\x01🎉", "\x01\x02" * 3])
def test_any_text_comes_back_as_it_was_written(text: str) -> None:
    stored = encode_text(text)
    assert "\x00" not in stored
    assert decode_text(stored) == text


def test_text_without_the_two_characters_is_stored_as_it_is() -> None:
    assert encode_text("plain é") == "plain é"
    assert encode_text("a\x00b") == "a\x01\x01b" and encode_text("a\x01b") == "a\x01\x02b"


@pytest.mark.parametrize(("thread_id", "states", "limit", "sql", "params"), [
    (None, None, None, "SELECT data FROM runs ORDER BY created_at DESC, n DESC LIMIT $1",
     [None]),
    ("t", None, 5, "SELECT data FROM runs WHERE thread_id = $1 ORDER BY created_at DESC, "
     "n DESC LIMIT $2", ["t", 5]),
    ("t", [S.QUEUED, S.RUNNING], None, "SELECT data FROM runs WHERE thread_id = $1 AND "
     "state = ANY($2::text[]) AND active ORDER BY created_at DESC, n DESC LIMIT $3",
     ["t", ["queued", "running"], None]),
    # A state that has ended among them: not only the active runs.
    (None, [S.QUEUED, S.COMPLETED], 1, "SELECT data FROM runs WHERE state = ANY($1::text[]) "
     "ORDER BY created_at DESC, n DESC LIMIT $2", [["queued", "completed"], 1]),
    (None, [], None, "SELECT data FROM runs WHERE state = ANY($1::text[]) "
     "ORDER BY created_at DESC, n DESC LIMIT $2", [[], None]),
])
def test_list_runs_sql(thread_id: str | None, states: list[RunState] | None,
                       limit: int | None, sql: str, params: list[object]) -> None:
    assert list_runs_sql(thread_id, states, limit) == (sql, params)


@pytest.mark.parametrize(("error", "gone"), [
    (ConnectionResetError("reset by peer"), True),
    (asyncpg.CannotConnectNowError("the database system is starting up"), True),
    (asyncpg.InterfaceError("cannot call Transaction.__aexit__(): the underlying connection "
                            "is closed"), True),  # cut mid-migration (chaos, seed 8080)
    (asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
     False),
    (asyncpg.InvalidPasswordError("password authentication failed"), False),
])
def test_what_says_the_server_was_not_reached(error: Exception, gone: bool) -> None:
    assert unreachable(error) is gone
