"""Where a platform's files may be fetched from: pure functions, table-tested.

A file URL comes from the platform's event (Slack's ``url_private_download``, a Discord
attachment's ``url``), and Slack's is fetched with the bot token, so the URL decides where
the token goes. Only an exact origin is trusted (scheme, host and port, as a browser
compares them): the platform's documented file hosts, plus any origin the config names
(``file_hosts``: a test server, a proxy that rewrites file URLs). Nothing is derived from
``api_url``: that origin serves the Web API, where a GET with the token reads any channel
the bot is in (``/api/conversations.history?channel=...``), and another port on its host is
another server altogether. URLs are read by httpx's parser, the one that makes the request,
so the check and the request cannot disagree about the host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection

__all__ = ["DISCORD_FILE_ORIGINS", "SLACK_FILE_ORIGINS", "allowed_file_url", "file_origin",
           "origin_of", "shown_origin"]

SLACK_FILE_ORIGINS = ("https://files.slack.com",)
"""Where ``url_private`` and ``url_private_download`` point (api.slack.com/types/file)."""
DISCORD_FILE_ORIGINS = ("https://cdn.discordapp.com", "https://media.discordapp.net")
"""An attachment's ``url`` and ``proxy_url`` (discord.com/developers/docs/reference)."""

_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL, the default port filled in; None for
    anything else (another scheme, no host, credentials in it, not a URL at all)."""
    import httpx  # here: the config's checks run in `maiden send`, which loads no httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    if parsed.scheme not in _PORTS or not parsed.raw_host or parsed.userinfo:
        return None
    return parsed.scheme, parsed.raw_host.decode("ascii"), parsed.port or _PORTS[parsed.scheme]


def allowed_file_url(url: str, origins: Collection[str]) -> bool:
    """Whether ``url`` is on one of ``origins`` exactly: same scheme, host and port."""
    found = origin_of(url)
    return found is not None and found in {origin_of(origin) for origin in origins}


def file_origin(text: str) -> str:
    """A configured file host as ``scheme://host[:port]``; ``ValueError`` says what is
    wrong with it. Plain http only on loopback (a test server)."""
    found = origin_of(text)
    if found is None:
        raise ValueError(f"{text!r} is not an http(s) origin such as 'https://files.example.com'")
    import httpx

    parsed = httpx.URL(text)
    if parsed.raw_path not in (b"", b"/") or parsed.fragment:
        raise ValueError(f"{text!r} is more than an origin; give its scheme, host and port "
                         "only")
    if found[0] == "http" and not _loopback(found[1]):
        raise ValueError(f"{text!r} is plain http off loopback: use https (the token and "
                         "the file would cross the network in clear)")
    return shown_origin(found)


def shown_origin(origin: tuple[str, str, int]) -> str:
    """``scheme://host[:port]``, the port left out where it is the scheme's default."""
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if port == _PORTS[scheme] else f":{port}")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
