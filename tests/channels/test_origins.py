"""Where a platform's files may be fetched from (``channels/origins.py``): scheme, host and
port matched exactly, read by the parser that makes the request; a configured file host
is an origin and nothing more."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.discord import DiscordConfig
from channels.origins import (
    DISCORD_FILE_ORIGINS,
    SLACK_FILE_ORIGINS,
    allowed_file_url,
    file_origin,
)
from channels.slack import SlackConfig

SLACK = SLACK_FILE_ORIGINS
TEST = (*SLACK_FILE_ORIGINS, "http://127.0.0.1:8123")


@pytest.mark.parametrize(("url", "origins", "allowed"), [
    ("https://files.slack.com/files-pri/T1-F1/download/a.png", SLACK, True),
    ("https://files.slack.com:443/files-pri/T1-F1/a.png", SLACK, True),  # the default port
    ("HTTPS://Files.Slack.COM/files-pri/T1-F1/a.png", SLACK, True),  # case does not matter
    ("http://files.slack.com/files-pri/T1-F1/a.png", SLACK, False),  # another scheme
    ("https://files.slack.com:8443/files-pri/T1-F1/a.png", SLACK, False),  # another port
    ("https://files.slack.com./files-pri/a.png", SLACK, False),  # not the same name
    ("https://slack.com/api/conversations.history?channel=C1", SLACK, False),  # the Web API
    ("https://files.slack.com.evil.example/a.png", SLACK, False),
    ("https://evil.example/?u=https://files.slack.com/a.png", SLACK, False),
    ("https://files.slack.com@evil.example/a.png", SLACK, False),  # userinfo, then the host
    ("https://files.slack.com\\@evil.example/a.png", SLACK, False),  # parsed as httpx does
    ("https://user:pw@files.slack.com/a.png", SLACK, False),  # credentials in the URL
    ("//files.slack.com/a.png", SLACK, False),  # no scheme
    ("https:///files.slack.com/a.png", SLACK, False),  # no host
    ("file:///etc/passwd", SLACK, False),
    ("ftp://files.slack.com/a.png", ("ftp://files.slack.com",), False),  # http(s) only
    ("", SLACK, False),
    ("not a url", SLACK, False),
    ("http://127.0.0.1:8123/files-pri/T1-F1/a.png", TEST, True),  # a configured test host
    ("http://127.0.0.1:52501/steal-private", TEST, False),  # same host, another port
    ("http://localhost:8123/files-pri/T1-F1/a.png", TEST, False),  # another name for it
    ("https://127.0.0.1:8123/a.png", TEST, False),  # another scheme on that port
    ("http://127.0.0.1/a.png", TEST, False),  # port 80
    ("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1&is=2&hm=3&",
     DISCORD_FILE_ORIGINS, True),
    ("https://media.discordapp.net/attachments/1/2/a.png", DISCORD_FILE_ORIGINS, True),
    ("https://discord.com/api/v10/users/@me", DISCORD_FILE_ORIGINS, False),
    ("https://cdn.discordapp.com/a.png", (), False),  # nothing allowed
])
def test_a_file_url_is_allowed_only_on_an_exact_origin(
        url: str, origins: tuple[str, ...], allowed: bool) -> None:
    assert allowed_file_url(url, origins) is allowed


@pytest.mark.parametrize(("entry", "origin"), [
    ("http://127.0.0.1:8123", "http://127.0.0.1:8123"),
    ("http://127.0.0.1:8123/", "http://127.0.0.1:8123"),
    ("HTTP://LOCALHOST:8123", "http://localhost:8123"),
    ("http://[::1]:8123", "http://[::1]:8123"),
    ("https://files.example.com:443", "https://files.example.com"),
    ("https://files.example.com:8443", "https://files.example.com:8443"),
])
def test_a_configured_file_host_is_an_origin(entry: str, origin: str) -> None:
    assert file_origin(entry) == origin


@pytest.mark.parametrize(("entry", "why"), [
    ("files.example.com", "is not an http(s) origin"),
    ("ftp://files.example.com", "is not an http(s) origin"),
    ("https://u:p@files.example.com", "is not an http(s) origin"),
    ("https://files.example.com/files-pri", "is more than an origin"),
    ("https://files.example.com?x=1", "is more than an origin"),
    ("https://files.example.com#x", "is more than an origin"),
    ("http://files.example.com", "plain http off loopback"),
])
def test_a_file_host_that_is_not_an_origin_is_a_config_error(entry: str, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        file_origin(entry)
    assert why in str(caught.value)
    for config in (SlackConfig, DiscordConfig):
        with pytest.raises(ValidationError, match="file_hosts"):
            config(file_hosts=[entry])


def test_the_configs_keep_file_hosts_as_origins() -> None:
    assert SlackConfig(file_hosts=["http://127.0.0.1:8123/"]).file_hosts == [
        "http://127.0.0.1:8123"]
    assert DiscordConfig().file_hosts == []
