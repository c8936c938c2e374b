"""A person's time zone from Slack (``channels/slack/zones.py``): the real slack-sdk client
against the fake Slack's ``users.info``, counted by the fake's own record of calls; and,
through `maiden run`'s wiring, the schedules' book asking it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot import load_config
from bot.app import open_app, open_channels
from bot.wiring import make_channels
from channels.slack.zones import DAY_S, SlackZones
from runtime import Origin
from schedules import Scheduler
from tests.fakes.site import free_port
from tests.fakes.slack import BOT_USER, SCOPES, FakeSlack, Workspace

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[3]
SAO, TOKYO = "America/Sao_Paulo", "Asia/Tokyo"
PERSON = "U0PERSON01"


class Clock:
    """Seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as started:
        yield started


def zones_of(fake: FakeSlack, clock: Callable[[], float] | None = None) -> SlackZones:
    return SlackZones(AsyncWebClient(token=fake.bot_token, base_url=fake.api_url),
                      clock=clock or Clock())


def asked(fake: FakeSlack) -> list[str]:
    """Whom ``users.info`` was asked about, in order (the fake's record)."""
    return [str(call["user"]) for call in fake.calls("users.info")]


def warnings_about(caplog: pytest.LogCaptureFixture, user: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and user in r.getMessage()]


async def test_the_zone_is_read_from_the_persons_profile(fake: FakeSlack) -> None:
    fake.person(PERSON, tz=SAO, tz_label="Brasilia Standard Time", tz_offset=-10_800)
    assert await zones_of(fake)(PERSON) == SAO
    assert asked(fake) == [PERSON]


async def test_asks_within_a_day_make_one_call_even_at_once(fake: FakeSlack) -> None:
    fake.person(PERSON, tz=SAO)
    zones = zones_of(fake)
    assert await asyncio.gather(*(zones(PERSON) for _ in range(5))) == [SAO] * 5
    assert await zones(PERSON) == SAO
    assert asked(fake) == [PERSON]


async def test_a_zone_is_asked_again_after_a_day(fake: FakeSlack) -> None:
    fake.person(PERSON, tz=SAO)
    clock = Clock()
    zones = zones_of(fake, clock)
    assert await zones(PERSON) == SAO
    fake.person(PERSON, tz=TOKYO)  # they moved
    clock.now += DAY_S - 1
    assert await zones(PERSON) == SAO
    assert asked(fake) == [PERSON]
    clock.now += 1
    assert await zones(PERSON) == TOKYO
    assert asked(fake) == [PERSON, PERSON]


def unknown(fake: FakeSlack) -> None:
    """Nobody set up: user_not_found."""


def rate_limited(fake: FakeSlack) -> None:
    fake.person(PERSON, tz=SAO)
    fake.fail("users.info", status=429, retry_after=1)  # the test's client does not wait


def unloadable(fake: FakeSlack) -> None:
    fake.person(PERSON, tz="Mars/Olympus_Mons")


@pytest.mark.parametrize(("failing", "why"), [
    (unknown, "users.info answered user_not_found"),
    (rate_limited, "users.info answered ratelimited"),
    (unloadable, "'Mars/Olympus_Mons', which this host's tz database does not know"),
], ids=["user_not_found", "ratelimited", "bad_tz"])
async def test_a_failure_is_none_not_kept_and_logged_once(
        fake: FakeSlack, caplog: pytest.LogCaptureFixture,
        failing: Callable[[FakeSlack], None], why: str) -> None:
    failing(fake)
    zones = zones_of(fake)
    assert await zones(PERSON) is None
    failing(fake)
    assert await zones(PERSON) is None  # asked again, not an answer kept
    assert asked(fake) == [PERSON, PERSON]
    (warning,) = warnings_about(caplog, PERSON)
    assert why in warning and "agent's time zone" in warning
    fake.person(PERSON, tz=SAO)  # Slack answers now
    assert await zones(PERSON) == SAO
    assert asked(fake) == [PERSON] * 3


async def test_without_users_read_the_log_names_the_scope(
        caplog: pytest.LogCaptureFixture) -> None:
    lacking = replace(Workspace(), scopes=tuple(s for s in SCOPES if s != "users:read"))
    async with FakeSlack(lacking) as fake:
        fake.person(PERSON, tz=SAO)
        assert await zones_of(fake)(PERSON) is None
    (warning,) = warnings_about(caplog, PERSON)
    assert "missing_scope" in warning and "users:read" in warning


async def test_slack_out_of_reach_is_none(caplog: pytest.LogCaptureFixture) -> None:
    client = AsyncWebClient(token="xoxb-1", base_url=f"http://127.0.0.1:{free_port()}/api/")
    assert await SlackZones(client)(PERSON) is None
    (warning,) = warnings_about(caplog, PERSON)
    assert "Slack could not be reached" in warning


async def test_an_asker_cancelled_leaves_the_call_to_the_others(fake: FakeSlack) -> None:
    """A tool call timed out while its zone was asked: the next asker joins the same call;
    and a call under way when the channel closes is None to whoever waits for it."""
    fake.person(PERSON, tz=SAO)
    await fake.misbehave("slow", 20, delay_s=0.5)
    zones = zones_of(fake)
    first = asyncio.create_task(zones(PERSON))
    await fake.until(lambda: asked(fake) == [PERSON], what="the first ask's call")
    first.cancel()
    assert await zones(PERSON) == SAO
    assert first.cancelled() and asked(fake) == [PERSON]
    other = asyncio.create_task(zones("U0OTHER001"))
    await fake.until(lambda: "U0OTHER001" in asked(fake), what="the second call")
    await zones.close()
    assert await other is None


async def test_a_bot_has_no_zone_and_that_is_kept(fake: FakeSlack) -> None:
    zones = zones_of(fake)
    assert await zones(BOT_USER) is None  # Slack gives bots America/Los_Angeles
    assert await zones(BOT_USER) is None
    assert asked(fake) == [BOT_USER]


async def test_maiden_run_lends_the_slack_zones_to_the_schedules(
        fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The channels made as `maiden run` makes them (``bot.wiring``, with its scheduler):
    the book reads a Slack person's own zone, and the agent's for someone Slack does not
    know."""
    fake.person(PERSON, tz=SAO)
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake.bot_token)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake.app_token)
    toml = (ROOT / "agent.toml").read_text().replace(
        "[agent]\n", '[agent]\ntimezone = "Europe/Lisbon"\n')
    (tmp_path / "agent.toml").write_text(
        toml + f'\n[http]\nenabled = false\n\n[channels.slack]\napi_url = "{fake.api_url}"\n'
        "open = true\n")
    loaded = load_config(tmp_path / "agent.toml")
    async with open_app(loaded, recover=True, serve=True, channels=make_channels(loaded)
                        ) as app, AsyncExitStack() as stack:
        scheduler = Scheduler(app.book, app.runtime, timers=False)
        channels = [prepared.make(app.runtime, scheduler, None) for prepared in app.channels]
        await open_channels(stack, app.runtime, channels)
        assert await app.book.zone_of(Origin(channel="slack", user=PERSON)) == SAO
        assert await app.book.zone_of(Origin(channel="slack", user="U0NOBODY1")) \
            == "Europe/Lisbon"
        assert await app.book.zone_of(Origin(channel="discord", user=PERSON)) \
            == "Europe/Lisbon"
    assert asked(fake) == [PERSON, "U0NOBODY1"]
