"""schedules/crontab.py, cron.py and trigger.py: crontab as crontab means it, and slots
exactly once, tested with tables; each table drives the APScheduler trigger too (what fires)."""

from __future__ import annotations

import pickle
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped]

from runtime import ConfigError
from schedules.cron import (
    Cron,
    MisfirePolicy,
    due_slots,
    last_slot,
    misfire,
    next_fires,
    parse_crontab,
    slot_key,
    slots_between,
)
from schedules.trigger import SlotTrigger

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(iso: str) -> datetime:
    """An aware datetime from ISO 8601 with its offset."""
    moment = datetime.fromisoformat(iso)
    assert moment.tzinfo is not None
    return moment


def isos(moments: list[datetime]) -> list[str]:
    return [m.isoformat() for m in moments]


# --- day of week: crontab numbering -------------------------------------------------------------

MON, TUE, WED, THU, FRI, SAT, SUN = range(7)  # datetime.weekday()


@pytest.mark.parametrize(
    ("dow", "days"),
    [
        ("0", {SUN}),
        ("7", {SUN}),
        ("0,7", {SUN}),
        ("1-5", {MON, TUE, WED, THU, FRI}),
        ("mon-fri", {MON, TUE, WED, THU, FRI}),
        ("MON-Fri", {MON, TUE, WED, THU, FRI}),
        ("sat,sun", {SAT, SUN}),
        ("6-7", {SAT, SUN}),
        ("5-7", {FRI, SAT, SUN}),
        ("5-0", {FRI, SAT, SUN}),
        ("fri-sun", {FRI, SAT, SUN}),
        ("0-2", {SUN, MON, TUE}),
        ("sun,wed", {SUN, WED}),
        ("1-7/2", {MON, WED, FRI, SUN}),
        ("*/2", {SUN, TUE, THU, SAT}),
        ("*", {MON, TUE, WED, THU, FRI, SAT, SUN}),
    ],
)
def test_day_of_week_is_crontab_numbering(dow: str, days: set[int]) -> None:
    cron = parse_crontab(f"0 12 * * {dow}", "Europe/Berlin")
    week = next_fires(cron, at("2025-06-01T13:00:00+02:00"), 20)  # a Sunday, after noon
    assert {d.weekday() for d in week} == days
    assert all(d.hour == 12 and d.minute == 0 for d in week)
    assert fires_of_trigger(cron, at("2025-06-01T13:00:00+02:00"), 20) == week


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 9 * * 1-5", ["2025-03-31T09:00:00+02:00", "2025-04-01T09:00:00+02:00",
                         "2025-04-02T09:00:00+02:00"]),
        ("*/15 * * * *", ["2025-03-28T20:15:00+01:00", "2025-03-28T20:30:00+01:00",
                          "2025-03-28T20:45:00+01:00"]),
        ("0 9 * * sat,sun", ["2025-03-29T09:00:00+01:00", "2025-03-30T09:00:00+02:00",
                             "2025-04-05T09:00:00+02:00"]),
        ("0 0 1 jan,jul *", ["2025-07-01T00:00:00+02:00", "2026-01-01T00:00:00+01:00",
                             "2026-07-01T00:00:00+02:00"]),
        ("5 4 * FEB-apr *", ["2025-03-29T04:05:00+01:00", "2025-03-30T04:05:00+02:00",
                             "2025-03-31T04:05:00+02:00"]),
        ("0,30 8,17 * * *", ["2025-03-29T08:00:00+01:00", "2025-03-29T08:30:00+01:00",
                             "2025-03-29T17:00:00+01:00"]),
        ("1-10/4 20 * * *", ["2025-03-28T20:01:00+01:00", "2025-03-28T20:05:00+01:00",
                             "2025-03-28T20:09:00+01:00"]),
        ("0 0 29 2 *", ["2028-02-29T00:00:00+01:00", "2032-02-29T00:00:00+01:00",
                        "2036-02-29T00:00:00+01:00"]),
        ("0 12 13 * fri", ["2025-04-04T12:00:00+02:00", "2025-04-11T12:00:00+02:00",
                           "2025-04-13T12:00:00+02:00"]),  # Fridays OR the 13th (a Sunday)
    ],
)
def test_next_fires_from_a_friday_evening_in_berlin(expr: str, expected: list[str]) -> None:
    friday = at("2025-03-28T20:00:00+01:00")
    assert friday.weekday() == FRI
    assert isos(next_fires(parse_crontab(expr, "Europe/Berlin"), friday, 3)) == expected


def test_next_fires_is_strictly_after_and_in_the_schedules_zone() -> None:
    cron = parse_crontab("0 9 * * *", "America/New_York")
    nine = at("2025-06-02T09:00:00-04:00")
    assert isos(next_fires(cron, nine, 1)) == ["2025-06-03T09:00:00-04:00"]
    assert isos(next_fires(cron, nine - timedelta(microseconds=1), 1)) == [nine.isoformat()]
    from_utc = next_fires(cron, datetime(2025, 6, 2, 12, tzinfo=UTC), 1)[0]
    assert from_utc.tzinfo == NEW_YORK and from_utc.isoformat() == "2025-06-02T09:00:00-04:00"
    assert next_fires(cron, nine, 0) == []


# --- day of month OR day of week -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected_days"),
    [
        # Both restricted: the 1st OR any Monday (June 2025 starts on a Sunday).
        ("0 0 1 * mon", ["2025-06-01", "2025-06-02", "2025-06-09", "2025-06-16", "2025-06-23",
                         "2025-06-30", "2025-07-01"]),
        ("0 0 1,15 * 6", ["2025-06-01", "2025-06-07", "2025-06-14", "2025-06-15", "2025-06-21",
                          "2025-06-28", "2025-07-01"]),
        # A field starting with '*' is unrestricted (as in Vixie cron): AND, as usual.
        ("0 0 * * mon", ["2025-06-02", "2025-06-09", "2025-06-16", "2025-06-23", "2025-06-30",
                         "2025-07-07", "2025-07-14"]),
        ("0 0 */10 * mon", ["2025-07-21", "2025-08-11", "2025-09-01", "2025-12-01",
                            "2026-05-11", "2026-06-01", "2026-08-31"]),
    ],
)
def test_day_of_month_or_day_of_week(expr: str, expected_days: list[str]) -> None:
    cron = parse_crontab(expr, "UTC")
    fires = next_fires(cron, at("2025-05-31T12:00:00+00:00"), len(expected_days))
    assert [f.date().isoformat() for f in fires] == expected_days
    assert fires_of_trigger(cron, at("2025-05-31T12:00:00+00:00"), len(expected_days)) == fires


def test_the_trigger_apscheduler_is_handed_is_ours() -> None:
    """No CronTrigger/OrTrigger: APScheduler is told our slots, and no other time."""
    trigger = SlotTrigger(parse_crontab("0 0 1 * mon", "UTC"))
    assert isinstance(trigger, BaseTrigger)
    assert str(trigger) == "slots['0 0 1 * mon' in UTC]"
    fires = fires_of_trigger(trigger.cron, at("2025-05-31T12:00:00+00:00"), 3)
    assert isos(fires) == ["2025-06-01T00:00:00+00:00", "2025-06-02T00:00:00+00:00",
                           "2025-06-09T00:00:00+00:00"]


def fires_of_trigger(cron: Cron, after: datetime, count: int) -> list[datetime]:
    """What APScheduler is told: the trigger asked as its scheduler asks, from ``after``
    (exclusive), each fire's time passed back as the previous one and as now."""
    trigger = SlotTrigger(cron)
    fires: list[datetime] = []
    previous, now = None, after + timedelta(microseconds=1)
    while len(fires) < count:
        fire = trigger.get_next_fire_time(previous, now)
        assert fire is not None
        fires.append(fire)
        previous = now = fire
    return fires


@pytest.mark.parametrize(
    "expr",
    ["0 9 * * 1-5", "0 9 * * 0", "0 9 * * 7", "30 6 * * 5-0", "0 0 * * 0-2", "*/15 8-10 * * *",
     "0 0 1 * mon", "0 12 13 * 5", "0 0 1-7 * sun", "0 3 1 jan,jun,dec *", "0 0 * * */2",
     "0 0 */10 * mon"],
)
@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_the_trigger_fires_where_the_slots_are_all_year(expr: str, zone: str) -> None:
    """What APScheduler is told equals our own arithmetic, across both DST changes."""
    cron = parse_crontab(expr, zone)
    start, end = at("2025-01-01T00:00:00+00:00"), at("2026-01-01T00:00:00+00:00")
    ours = slots_between(cron, start, end, 10_000)
    assert ours
    theirs = fires_of_trigger(cron, start, len(ours) + 1)
    assert theirs[-1] > end
    assert theirs[:-1] == ours


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "timezone", "problems"),
    [
        ("0 9 * * 1 2", "UTC", [("schedules.0.cron", "expected 5 fields, got 6")]),
        ("0 9 * *", "UTC", [("schedules.0.cron", "expected 5 fields, got 4")]),
        ("", "UTC", [("schedules.0.cron", "expected 5 fields, got an empty expression")]),
        ("   ", "UTC", [("schedules.0.cron", "expected 5 fields, got an empty expression")]),
        ("61 * * * *", "UTC", [("schedules.0.cron", "61 is not a minute (0-59)")]),
        ("0 24 * * *", "UTC", [("schedules.0.cron", "24 is not an hour (0-23)")]),
        ("0 0 0 * *", "UTC", [("schedules.0.cron", "0 is not a day of the month (1-31)")]),
        ("0 0 32 * *", "UTC", [("schedules.0.cron", "32 is not a day of the month (1-31)")]),
        ("0 0 * 13 *", "UTC", [("schedules.0.cron", "13 is not a month (1-12 or jan-dec)")]),
        ("0 0 * * 8", "UTC", [("schedules.0.cron",
                               "8 is not a day of the week (0-7 or sun-sat)")]),
        ("0 0 * * mond", "UTC", [("schedules.0.cron",
                                  "'mond' is not a day of the week (0-7 or sun-sat)")]),
        ("0 0 * june *", "UTC", [("schedules.0.cron",
                                  "'june' is not a month (1-12 or jan-dec)")]),
        ("0 0 * * -1", "UTC", [("schedules.0.cron",
                                "'' is not a day of the week (0-7 or sun-sat)")]),
        ("*/0 * * * *", "UTC", [("schedules.0.cron", "'0' is not a step (a whole number from 1)")]),
        ("*/x * * * *", "UTC", [("schedules.0.cron", "'x' is not a step (a whole number from 1)")]),
        ("*/ * * * *", "UTC", [("schedules.0.cron", "'' is not a step (a whole number from 1)")]),
        ("5/15 * * * *", "UTC", [("schedules.0.cron",
                                  "step '5/15' needs a range or '*' before the '/'")]),
        ("0 17-9 * * *", "UTC", [("schedules.0.cron", "range '17-9' runs backwards")]),
        ("0 0 * * fri-mon", "UTC", [("schedules.0.cron", "range 'fri-mon' runs backwards")]),
        ("³ * * * *", "UTC", [("schedules.0.cron", "'³' is not a minute (0-59)")]),
        ("*/² * * * *", "UTC", [("schedules.0.cron", "'²' is not a step (a whole number from 1)")]),
        ("1,,2 * * * *", "UTC", [("schedules.0.cron", "empty item in '1,,2'")]),
        ("0 0 L * *", "UTC", [("schedules.0.cron", "'L' is not a day of the month (1-31)")]),
        ("0 0 31 feb,apr *", "UTC", [("schedules.0.cron",
                                      "'0 0 31 feb,apr *' never fires: no chosen month has "
                                      "that day")]),
        ("0 9 * * *", "Mars/Base", [("schedules.0.timezone", "unknown timezone 'Mars/Base'")]),
        ("0 9 * * *", "", [("schedules.0.timezone", "unknown timezone ''")]),
        ("0 9 * * *", "../etc/passwd", [("schedules.0.timezone",
                                         "unknown timezone '../etc/passwd'")]),
        ("99 9 * * 9", "Mars/Base", [("schedules.0.timezone", "unknown timezone 'Mars/Base'"),
                                     ("schedules.0.cron", "99 is not a minute (0-59)"),
                                     ("schedules.0.cron",
                                      "9 is not a day of the week (0-7 or sun-sat)")]),
    ],
)
def test_invalid_lines_name_the_key_and_the_reason(
    expr: str, timezone: str, problems: list[tuple[str, str]]
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_crontab(expr, timezone, key="schedules.0.cron")
    got = [(key, reason.split(" (minute hour")[0]) for key, reason in caught.value.problems]
    assert got == problems
    assert f"{problems[0][0]}: {problems[0][1]}" in str(caught.value)


def test_the_key_paths_are_the_callers() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_crontab("1 2 3", "Mars/Base", key="schedules.daily.cron", timezone_key="tz")
    assert caught.value.problems == [
        ("tz", "unknown timezone 'Mars/Base'"),
        ("schedules.daily.cron",
         "expected 5 fields, got 3 (minute hour day-of-month month day-of-week)"),
    ]
    with pytest.raises(ConfigError) as caught:
        parse_crontab("0 0 * * *", "Nowhere")
    assert caught.value.problems == [("timezone", "unknown timezone 'Nowhere'")]


# --- daylight saving time: every slot once, at the instant the user expects -------------------


@pytest.mark.parametrize(
    ("expr", "zone", "expected"),
    [
        # Spring forward: 02:00-03:00 does not exist; the missing 02:30 fires at 03:00.
        ("30 2 * * *", "Europe/Berlin",
         ["2025-03-29T02:30:00+01:00", "2025-03-30T03:00:00+02:00",
          "2025-03-31T02:30:00+02:00"]),
        ("30 2 * * *", "America/New_York",
         ["2025-03-08T02:30:00-05:00", "2025-03-09T03:00:00-04:00",
          "2025-03-10T02:30:00-04:00"]),
        # Every missing slot and 03:00 itself are one slot at 03:00.
        ("*/20 1-3 * * *", "Europe/Berlin",
         ["2025-03-30T01:00:00+01:00", "2025-03-30T01:20:00+01:00",
          "2025-03-30T01:40:00+01:00", "2025-03-30T03:00:00+02:00",
          "2025-03-30T03:20:00+02:00", "2025-03-30T03:40:00+02:00"]),
        ("*/30 2 * * *", "America/New_York",
         ["2025-03-08T02:00:00-05:00", "2025-03-08T02:30:00-05:00",
          "2025-03-09T03:00:00-04:00", "2025-03-10T02:00:00-04:00"]),
        # Fall back: 02:00-03:00 (Berlin), 01:00-02:00 (New York) happen twice; first wins.
        ("30 2 * * *", "Europe/Berlin",
         ["2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00",
          "2025-10-27T02:30:00+01:00"]),
        ("30 1 * * *", "America/New_York",
         ["2025-11-01T01:30:00-04:00", "2025-11-02T01:30:00-04:00",
          "2025-11-03T01:30:00-05:00"]),
        ("0,30 * * * *", "Europe/Berlin",
         ["2025-10-26T01:30:00+02:00", "2025-10-26T02:00:00+02:00",
          "2025-10-26T02:30:00+02:00", "2025-10-26T03:00:00+01:00"]),
        ("0,30 * * * *", "America/New_York",
         ["2025-11-02T00:30:00-04:00", "2025-11-02T01:00:00-04:00",
          "2025-11-02T01:30:00-04:00", "2025-11-02T02:00:00-05:00"]),
    ],
)
def test_dst_each_slot_once_at_the_right_instant(
    expr: str, zone: str, expected: list[str]
) -> None:
    cron = parse_crontab(expr, zone)
    before_first = at(expected[0]) - timedelta(seconds=1)
    fires = next_fires(cron, before_first, len(expected))
    assert isos(fires) == expected
    assert len({f.astimezone(UTC) for f in fires}) == len(fires)
    # Asked one at a time, or as a span, or as a span walked from its end: the same slots.
    one_by_one: list[datetime] = []
    previous = before_first
    for _ in expected:
        previous = next_fires(cron, previous, 1)[0]
        one_by_one.append(previous)
    assert one_by_one == fires
    assert slots_between(cron, before_first, fires[-1], 100) == fires
    assert slots_between(cron, before_first, fires[-1], 2) == fires[-2:]
    assert fires_of_trigger(cron, before_first, len(expected)) == fires


def test_the_trigger_fires_at_dst_as_the_slots_do() -> None:
    """Where APScheduler 3.11's own CronTrigger fires a missing 02:30 at 03:30 and a repeated
    02:30 twice, the trigger fires at the transition (03:00) and once."""
    spring = parse_crontab("30 2 * * *", "Europe/Berlin")
    fired = fires_of_trigger(spring, at("2025-03-29T12:00:00+01:00"), 1)[0]
    assert fired.astimezone(UTC).isoformat() == "2025-03-30T01:00:00+00:00"  # 03:00 CEST
    assert next_fires(spring, at("2025-03-29T12:00:00+01:00"), 1) == [fired]

    fall = parse_crontab("30 2 * * *", "Europe/Berlin")
    fired_twice = fires_of_trigger(fall, at("2025-10-25T12:00:00+02:00"), 2)
    assert isos(fired_twice) == ["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]
    assert next_fires(fall, at("2025-10-25T12:00:00+02:00"), 2) == fired_twice


@pytest.mark.parametrize(
    ("expr", "zone", "start", "end"),
    [
        ("30 2 * * *", "Europe/Berlin", "2025-03-28T00:00:00+01:00", "2025-04-02T00:00:00+02:00"),
        ("30 2 * * *", "Europe/Berlin", "2025-10-24T00:00:00+02:00", "2025-10-29T00:00:00+01:00"),
        ("*/10 * * * *", "Europe/Berlin", "2025-03-30T00:00:00+01:00",
         "2025-03-30T05:00:00+02:00"),
        ("*/10 * * * *", "Europe/Berlin", "2025-10-26T00:00:00+02:00",
         "2025-10-26T05:00:00+01:00"),
        ("30 2 * * *", "America/New_York", "2025-03-07T00:00:00-05:00",
         "2025-03-11T00:00:00-04:00"),
        ("0,30 1 * * *", "America/New_York", "2025-10-31T00:00:00-04:00",
         "2025-11-04T00:00:00-05:00"),
        ("*/15 * * * *", "America/New_York", "2025-11-02T00:00:00-04:00",
         "2025-11-02T04:00:00-05:00"),
        ("0 0 1 * mon", "UTC", "2025-01-01T00:00:00+00:00", "2025-12-31T00:00:00+00:00"),
    ],
)
def test_the_triggers_fires_are_the_slots_and_claim_each_once(
    expr: str, zone: str, start: str, end: str
) -> None:
    """Around DST the trigger fires at each slot once, and each fire's last_slot is the slot
    it fired for, so every slot is claimed exactly once."""
    cron = parse_crontab(expr, zone)
    slots = slots_between(cron, at(start), at(end), 10_000)
    fires = [f for f in fires_of_trigger(cron, at(start), 2 * len(slots) + 5) if f <= at(end)]
    assert fires == slots
    claimed: dict[str, datetime] = {}
    for fire in fires:
        claimed.setdefault(slot_key("job", last_slot(cron, fire)), fire)
    assert sorted(claimed) == sorted(slot_key("job", s) for s in slots)


@pytest.mark.parametrize(
    ("moment", "slot"),
    [
        ("2025-03-30T03:00:00+02:00", "2025-03-30T03:00:00+02:00"),
        ("2025-03-30T03:30:00+02:00", "2025-03-30T03:00:00+02:00"),  # APScheduler's 02:30
        ("2025-03-30T02:59:59+02:00", "2025-03-29T02:30:00+01:00"),
        ("2025-10-26T02:30:00+01:00", "2025-10-26T02:30:00+02:00"),  # the repeat: first one
        ("2025-10-26T02:29:59+02:00", "2025-10-25T02:30:00+02:00"),
    ],
)
def test_last_slot(moment: str, slot: str) -> None:
    cron = parse_crontab("30 2 * * *", "Europe/Berlin")
    assert last_slot(cron, at(moment)).isoformat() == slot


def test_datetimes_in_the_same_zone_are_compared_as_instants() -> None:
    """Same-zone datetimes compare by wall clock (fold ignored); the arithmetic must not."""
    cron = parse_crontab("*/30 * * * *", "Europe/Berlin")
    second_0230 = datetime(2025, 10, 26, 2, 30, tzinfo=BERLIN, fold=1)  # 01:30Z
    assert isos(next_fires(cron, second_0230, 2)) == [
        "2025-10-26T03:00:00+01:00", "2025-10-26T03:30:00+01:00"]
    first_0200 = datetime(2025, 10, 26, 2, 0, tzinfo=BERLIN)
    assert isos(slots_between(cron, first_0200, second_0230, 10)) == ["2025-10-26T02:30:00+02:00"]
    missing_0230 = datetime(2025, 3, 30, 2, 30, tzinfo=BERLIN)  # as APScheduler hands it out
    assert isos(next_fires(cron, missing_0230, 1)) == ["2025-03-30T04:00:00+02:00"]
    first_0230 = second_0230.replace(fold=0)
    assert misfire("all", [second_0230, first_0230, first_0230], 5) == [first_0230, second_0230]
    assert misfire("once", [second_0230, first_0230], 5)[0].fold == 1


def test_a_thousand_slots_one_by_one_equal_the_span() -> None:
    cron = parse_crontab("*/7 * * * *", "Europe/Berlin")
    start = at("2025-10-26T01:00:00+02:00")  # across the fall-back hour
    slots: list[datetime] = []
    previous = start
    for _ in range(1000):
        (previous,) = next_fires(cron, previous, 1)
        slots.append(previous)
    assert slots == sorted(set(slots))
    assert slots_between(cron, start, slots[-1], 1000) == slots
    assert slots_between(cron, start, slots[-1], 5000) == slots
    assert next_fires(cron, start, 1000) == slots
    assert slots_between(cron, slots[0], slots[-1], 1000) == slots[1:]
    assert slots_between(cron, start, slots[-1] - timedelta(seconds=1), 1000) == slots[:-1]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York"])
def test_a_year_of_quarter_hours_has_every_slot_once(zone: str) -> None:
    cron = parse_crontab("*/15 * * * *", zone)
    start = datetime(2025, 1, 1, tzinfo=ZoneInfo(zone))
    end = datetime(2026, 1, 1, tzinfo=ZoneInfo(zone))
    slots = slots_between(cron, start, end, 10**6)
    # 365 days of 96 quarters; spring forward loses four, fall back repeats none.
    assert len(slots) == 365 * 96 - 4
    assert all(a < b for a, b in pairwise(slots))
    assert slots[0] == start + timedelta(minutes=15) and slots[-1] == end


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York",
                                  "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Apia"])
def test_slots_equal_a_minute_by_minute_scan(zone: str) -> None:
    """Away from DST changes the walk starts at the edge itself (a shortcut); a scan of
    every minute in UTC, matching the wall clock, is the reference, across a year."""
    import random
    rng = random.Random(zone)
    tz = ZoneInfo(zone)
    for expr in ("*/5 * * * *", "0 9 * * 1-5", "17 */3 * * *", "0 0 * * 0", "30 2 * * *"):
        cron = parse_crontab(expr, zone)
        for _ in range(8):
            edge = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(
                minutes=rng.randrange(365 * 24 * 60), seconds=rng.choice([0, 1, 59]))
            moment, found = edge.replace(second=0), list[datetime]()
            while len(found) < 3:
                moment += timedelta(minutes=1)
                wall = moment.astimezone(tz)
                if moment > edge and wall.minute in cron.minutes and wall.hour in cron.hours \
                        and cron.day_matches(wall.date()):
                    found.append(moment)
            hours = int((found[-1] - edge) / timedelta(hours=1)) + 48
            offsets = {(edge + timedelta(hours=h - 24)).astimezone(tz).utcoffset()
                       for h in range(hours)}
            if len(offsets) > 1:
                continue  # a DST change near: the DST tables above cover those
            assert [f.astimezone(UTC) for f in next_fires(cron, edge, 3)] == found, expr
            assert [s.astimezone(UTC) for s in slots_between(cron, edge, found[-1], 10)] \
                == found


def test_slots_between_keeps_the_newest_limit() -> None:
    cron = parse_crontab("0 * * * *", "UTC")
    start, end = at("2025-06-01T00:00:00+00:00"), at("2025-06-01T05:30:00+00:00")
    assert isos(slots_between(cron, start, end, 2)) == [
        "2025-06-01T04:00:00+00:00", "2025-06-01T05:00:00+00:00"]
    assert len(slots_between(cron, start, end, 10)) == 5
    assert slots_between(cron, start, end, 0) == []
    assert slots_between(cron, end, start, 10) == []


def test_naive_datetimes_are_refused() -> None:
    cron = parse_crontab("0 * * * *", "UTC")
    with pytest.raises(ValueError, match="naive"):
        next_fires(cron, datetime(2025, 1, 1), 1)
    with pytest.raises(ValueError, match="naive"):
        slots_between(cron, datetime(2025, 1, 1), datetime(2025, 1, 2, tzinfo=UTC), 1)
    with pytest.raises(ValueError, match="naive"):
        slot_key("daily", datetime(2025, 1, 1))


# --- keys and misfires ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slot", "key"),
    [
        ("daily", "2025-03-31T09:00:00+02:00", "schedule:daily:2025-03-31T07:00:00+00:00"),
        ("daily", "2025-03-31T07:00:00+00:00", "schedule:daily:2025-03-31T07:00:00+00:00"),
        ("ny", "2025-11-02T01:30:00-04:00", "schedule:ny:2025-11-02T05:30:00+00:00"),
        ("ny", "2025-11-02T01:30:00.999-05:00", "schedule:ny:2025-11-02T06:30:00+00:00"),
    ],
)
def test_slot_key_is_utc_with_seconds(name: str, slot: str, key: str) -> None:
    assert slot_key(name, at(slot)) == key


def test_the_two_first_occurrences_of_a_repeated_hour_have_distinct_keys() -> None:
    cron = parse_crontab("30 1 * * *", "America/New_York")
    fires = next_fires(cron, at("2025-11-01T00:00:00-04:00"), 3)
    keys = [slot_key("ny", f) for f in fires]
    assert keys == ["schedule:ny:2025-11-01T05:30:00+00:00",
                    "schedule:ny:2025-11-02T05:30:00+00:00",
                    "schedule:ny:2025-11-03T06:30:00+00:00"]


HOURS = [at(f"2025-06-01T0{h}:00:00+00:00") for h in range(5)]


@pytest.mark.parametrize(
    ("policy", "missed", "max_catchup", "expected"),
    [
        ("skip", HOURS, 3, []),
        ("skip", [], 3, []),
        ("once", HOURS, 3, HOURS[-1:]),
        ("once", list(reversed(HOURS)), 3, HOURS[-1:]),
        ("once", HOURS, 0, HOURS[-1:]),
        ("once", [], 3, []),
        ("all", HOURS, 3, HOURS[2:]),
        ("all", HOURS, 10, HOURS),
        ("all", [HOURS[3], HOURS[0], HOURS[3], HOURS[1]], 10, [HOURS[0], HOURS[1], HOURS[3]]),
        ("all", HOURS, 1, HOURS[-1:]),
        ("all", HOURS, 0, []),
        ("all", [], 3, []),
    ],
)
def test_misfire(
    policy: MisfirePolicy, missed: list[datetime], max_catchup: int, expected: list[datetime]
) -> None:
    assert misfire(policy, missed, max_catchup) == expected


@pytest.mark.parametrize(
    ("policy", "max_catchup", "on_time", "expected"),
    [
        ("skip", 3, True, HOURS[-1:]),  # the newest is on time: it runs, the rest are missed
        ("once", 3, True, HOURS[-1:]),
        ("all", 3, True, HOURS[-3:]),  # caught up before it, within max_catchup
        ("all", 1, True, HOURS[-1:]),
        ("skip", 3, False, []),  # all were missed: misfire decides
        ("once", 3, False, HOURS[-1:]),
        ("all", 3, False, HOURS[-3:]),
        ("all", 0, False, []),
    ],
)
def test_due_slots(policy: MisfirePolicy, max_catchup: int, on_time: bool,
                   expected: list[datetime]) -> None:
    assert due_slots(HOURS, policy, max_catchup, on_time=on_time) == expected
    assert due_slots([], policy, max_catchup, on_time=on_time) == []


@pytest.mark.parametrize(("zone", "night"), [("Europe/Berlin", date(2026, 3, 29)),
                                             ("America/New_York", date(2026, 3, 8))])
def test_the_alarm_goes_off_at_the_spring_forward_transition(zone: str, night: date) -> None:
    """APScheduler's CronTrigger would wake a 02:30 job at 03:30 on the night the clocks skip
    from 02:00 to 03:00; the slot is due at 03:00, and the alarm goes off then."""
    cron = parse_crontab("30 2 * * *", zone)
    alarm, tz = SlotTrigger(cron), ZoneInfo(zone)
    now = datetime.combine(night - timedelta(days=1), time(12), tz)
    fired: list[datetime] = []
    previous = None
    for _ in range(3):
        previous = alarm.get_next_fire_time(previous, now)
        assert previous is not None
        fired.append(previous)
        now = previous
    walls = [(f.astimezone(tz).date(), f.astimezone(tz).time()) for f in fired]
    assert walls == [(night, time(3)), (night + timedelta(days=1), time(2, 30)),
                     (night + timedelta(days=2), time(2, 30))]
    # Every other day of the year too, the alarm is the next slot.
    june = datetime(2026, 6, 1, 12, tzinfo=tz)
    assert alarm.get_next_fire_time(None, june) == next_fires(cron, june, 1)[0]
    # A slot due this very instant still fires; one fired already does not fire again.
    slot = next_fires(cron, june, 1)[0]
    assert alarm.get_next_fire_time(None, slot) == slot
    assert alarm.get_next_fire_time(slot, slot) == next_fires(cron, slot, 1)[0]


def test_the_trigger_survives_pickling() -> None:
    """What a persistent APScheduler job store would do with it."""
    trigger = SlotTrigger(parse_crontab("30 2 * * 1-5", "America/New_York"))
    copy = pickle.loads(pickle.dumps(trigger))
    assert copy.cron == trigger.cron
    now = at("2026-03-07T12:00:00-05:00")
    assert copy.get_next_fire_time(None, now) == trigger.get_next_fire_time(None, now)
