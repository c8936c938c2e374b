"""`[[schedules]]` read at load time, and `maiden schedules` listing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import parse_config
from runtime import ConfigError
from tests.processes.test_cli import maiden

BASE = """
[[schedules]]
name = "standup"
cron = "0 9 * * 1-5"
timezone = "Europe/Berlin"
prompt = "Summarise yesterday's issues"
"""


def test_a_good_schedule() -> None:
    cfg = parse_config(BASE)
    (schedule,) = cfg.read_schedules()
    assert schedule.name == "standup" and schedule.thread == "schedule:standup"
    assert schedule.origin.channel == "schedule" and schedule.origin.target == {}
    assert schedule.cron.timezone == "Europe/Berlin"


@pytest.mark.parametrize(("extra", "key", "reason"), [
    ('cron = "61 9 * * *"', "schedules.0 (standup).cron", "61 is not a minute"),
    ('cron = "0 9 * *"', "schedules.0 (standup).cron", "expected 5 fields"),
    ('timezone = "Mars/Base"', "schedules.0 (standup).timezone", "unknown timezone 'Mars/Base'"),
    ('deliver = "slack:C1"', "schedules.0 (standup).deliver", "[channels.slack] is not configured"),
    ('deliver = "teams:x"', "schedules.0 (standup).deliver", "is not a target"),
    ('deliver = "discord:general"', "schedules.0 (standup).deliver", "is not a target"),
    ('name = "a b"', "schedules.0 (a b).name", "is not a schedule name"),
    ('misfire = "sometimes"', "schedules.0 (standup).misfire", "Input should be 'skip', "
     "'once' or 'all'"),
    ('overlap = "never"', "schedules.0 (standup).overlap", "Input should be 'skip' or 'queue'"),
    ("max_catchup = 0", "schedules.0 (standup).max_catchup", "greater than or equal to 1"),
    ('colour = "red"', "schedules.0 (standup).colour", "unknown key"),
])
def test_a_bad_schedule_names_the_key(extra: str, key: str, reason: str) -> None:
    field = extra.split(" = ")[0]
    text = "\n".join(line for line in BASE.splitlines() if not line.startswith(f"{field} ="))
    with pytest.raises(ConfigError) as error:
        parse_config(text + "\n" + extra + "\n")
    assert f"agent.toml: {key}: " in str(error.value) and reason in str(error.value)


def test_a_schedule_without_a_usable_name_is_named_by_its_place() -> None:
    for text in (BASE.replace('name = "standup"\n', "") + 'misfire = "x"\n',
                 BASE.replace('name = "standup"', "name = 7") + 'misfire = "x"\n'):
        with pytest.raises(ConfigError) as error:
            parse_config(text)
        assert "agent.toml: schedules.0.misfire: " in str(error.value)


def test_names_are_unique_and_the_default_zone_is_the_agents() -> None:
    with pytest.raises(ConfigError,
                       match=r"schedules\.1 \(standup\)\.name: 'standup' is defined twice"):
        parse_config(BASE + BASE)
    text = BASE.replace('timezone = "Europe/Berlin"\n', "") + '\n[agent]\ntimezone = "Nowhere"\n'
    with pytest.raises(ConfigError, match=r"agent\.timezone: unknown timezone 'Nowhere'"):
        parse_config(text)


def test_delivering_to_a_configured_channel() -> None:
    cfg = parse_config(BASE + 'deliver = "slack:C0TEAM:1700000000.000100"\n'
                       "[channels.slack]\nallow_channels = ['C0TEAM']\n")
    (schedule,) = cfg.read_schedules()
    assert (schedule.origin.channel, schedule.origin.target) == (
        "slack", {"channel": "C0TEAM", "thread_ts": "1700000000.000100"})


def test_maiden_schedules_lists_the_next_fires(home: Path) -> None:
    with (home / "agent.toml").open("a") as f:
        f.write(BASE)
    result = maiden(home, "schedules")
    assert result.returncode == 0, result.stderr
    first, nxt, last = result.stdout.splitlines()
    assert first.startswith("standup  '0 9 * * 1-5' Europe/Berlin  -> thread 'schedule:standup'")
    fires = nxt.removeprefix("    next: ").split(", ")
    assert len(fires) == 3 and all(f[11:] in ("09:00:00+01:00", "09:00:00+02:00")
                                   for f in fires)
    assert last == "    last slot: -"
    bad = (home / "agent.toml").read_text().replace("0 9 * * 1-5", "0 9 * * 8")
    (home / "agent.toml").write_text(bad)
    refused = maiden(home, "schedules")
    assert refused.returncode == 2 and "schedules.0 (standup).cron" in refused.stderr


def test_every_bad_key_of_a_schedule_is_named_at_once() -> None:
    text = BASE.replace('cron = "0 9 * * 1-5"', 'cron = "61 9 * * *"') + 'deliver = "slack:C1"\n'
    with pytest.raises(ConfigError) as error:
        parse_config(text)
    assert "schedules.0 (standup).cron: 61 is not a minute" in str(error.value)
    assert "schedules.0 (standup).deliver: delivers to slack" in str(error.value)
