"""The routing table and the spend caps' periods: pure functions, no store."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from runtime import CapConfig, Origin, RouteConfig, Where, person_key, place_key
from runtime.engine.caps import period_bounds
from runtime.model.routing import route

ROUTES = (
    RouteConfig(channel="schedule", schedule="nightly", agent="ops"),
    RouteConfig(place="C_SUPPORT", agent="support"),
    RouteConfig(channel="discord", place="G_ENG", agent="eng"),
    RouteConfig(place="dm", agent="personal"),
    RouteConfig(channel="http", thread_prefix="eng-", agent="eng"),
    RouteConfig(channel="slack", place="*", agent="slacker"),
)


def where(channel: str, thread: str = "t", *ids: str, direct: bool = False,
          schedule: str | None = None) -> Where:
    return Where(channel, thread, ids, direct, schedule)


@pytest.mark.parametrize(("place", "agent"), [
    (where("slack", "slack:T:C_SUPPORT:1", "C_SUPPORT"), "support"),
    (where("slack", "slack:T:C_RANDOM", "C_RANDOM"), "slacker"),
    (where("slack", "slack:T:D1", "D1", direct=True), "personal"),
    # A Discord thread under a guild's channel: its ids are (thread, parent, guild).
    (where("discord", "discord:G_ENG:TH", "TH", "C_PARENT", "G_ENG"), "eng"),
    (where("discord", "discord:G_OTHER:C", "C", "G_OTHER"), "default"),
    (where("discord", "discord:dm:C", "C", direct=True), "personal"),
    (where("http", "eng-42"), "eng"),
    (where("http", "support-1"), "default"),
    (where("cli", "eng-42"), "default"),  # the prefix route is http's
    (where("schedule", "schedule:nightly", schedule="nightly"), "ops"),
    (where("schedule", "schedule:weekly", schedule="weekly"), "default"),
])
def test_the_first_route_that_matches_wins(place: Where, agent: str) -> None:
    assert route(ROUTES, place, "default") == agent


def test_a_route_naming_nothing_catches_everything_after_it() -> None:
    routes = (RouteConfig(place="C1", agent="a"), RouteConfig(agent="b"),
              RouteConfig(place="C2", agent="c"))
    assert route(routes, where("slack", "t", "C1"), "x") == "a"
    assert route(routes, where("slack", "t", "C2"), "x") == "b"
    assert route((), where("slack", "t", "C2"), "x") == "x"
    assert RouteConfig(agent="b").describe() == "everything else -> b"
    assert ROUTES[2].describe() == "channel discord, place G_ENG -> eng"


def test_a_schedule_is_where_its_runs_come_from() -> None:
    # A schedule that delivers to Slack is still routed as the schedule.
    found = Where.of("schedule:nightly", Origin(channel="slack", place=("C_SUPPORT",)),
                     schedule="nightly")
    assert found.channel == "schedule" and route(ROUTES, found, "default") == "ops"


def test_a_place_key_is_the_channel_a_message_came_from() -> None:
    assert place_key(Origin(channel="slack", place=("C1",))) == "slack:C1"
    assert place_key(Origin(channel="discord", place=("C1", "G1"))) == "discord:C1"
    assert place_key(Origin(channel="discord", place=("TH", "C1", "G1"))) == "discord:C1"
    assert place_key(Origin(channel="http")) == "http"


@pytest.mark.parametrize(("origin", "person"), [
    (Origin(channel="slack", user="U1", place=("C1",)), "U1"),
    (Origin(channel="http", user="ana"), "ana"),
    (Origin(channel="cli"), "local"),  # `maiden send`, `maiden chat`
    (Origin(channel="http"), "local"),
    (Origin(channel="schedule"), "(nobody)"),
])
def test_a_person_key_names_who_asked(origin: Origin, person: str) -> None:
    assert person_key(origin) == person


def test_periods_start_at_midnight_in_their_zone() -> None:
    paris = ZoneInfo("Europe/Paris")
    at = datetime(2026, 3, 29, 15, 0, tzinfo=paris).timestamp()  # the day clocks go forward
    start, end = period_bounds("day", at, paris)
    assert datetime.fromtimestamp(start, paris) == datetime(2026, 3, 29, tzinfo=paris)
    assert datetime.fromtimestamp(end, paris) == datetime(2026, 3, 30, tzinfo=paris)
    assert end - start == 23 * 3600
    start, end = period_bounds("month", datetime(2026, 12, 31, 23, 59, tzinfo=paris)
                               .timestamp(), paris)
    assert datetime.fromtimestamp(start, paris) == datetime(2026, 12, 1, tzinfo=paris)
    assert datetime.fromtimestamp(end, paris) == datetime(2027, 1, 1, tzinfo=paris)


@pytest.mark.parametrize(("fields", "error"), [
    ({"scope": "user"}, "set tokens and/or cost_usd"),
    ({"scope": "user", "tokens": 5, "place": "C1"},
     "only a cap of scope 'place' names a place"),
    ({"scope": "place", "tokens": 5, "agent": "eng"}, "only a cap of scope 'agent'"),
    ({"scope": "user", "tokens": 5, "timezone": "Mars/Base"}, "unknown timezone"),
    ({"scope": "team", "tokens": 5}, "'user', 'place' or 'agent'"),
    ({"scope": "user", "tokens": 5, "period": "week"}, "'day' or 'month'"),
])
def test_a_cap_that_cannot_work_is_refused(fields: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        CapConfig.model_validate(fields)
