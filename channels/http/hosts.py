"""The names this server answers to (``[http] allowed_hosts``), pure: no web framework
loads for it, so reading the config stays cheap for every command."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HOST_CHARS", "LOOPBACK_NAMES", "Hosts", "split_allowed"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# What a Host header may hold: a name, an IPv4 or a bracketed IPv6 address, a port.
HOST_CHARS = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


@dataclass(frozen=True, slots=True)
class Hosts:
    """The names this server answers to: ``own`` with the port it is bound to (read from
    each request's ASGI scope, so port 0 works), and ``extra`` as ``(name, port)``, a port
    of None meaning any, a name ``*.example.com`` any subdomain, ``*`` every host."""

    own: frozenset[str]
    extra: frozenset[tuple[str, int | None]] = frozenset()
    origins: frozenset[str] = frozenset()
    """Other origins allowed to send state-changing requests (``[http] cors_origins``)."""

    @classmethod
    def of(cls, bound_host: str, allowed: Iterable[str] = (),
           origins: Iterable[str] = ()) -> Hosts:
        """Loopback's names and the bound host itself (unless it is a wildcard address such
        as 0.0.0.0), with the bound port; and each of ``allowed``: ``name`` (any port) or
        ``name:port``."""
        own = set(LOOPBACK_NAMES)
        if not _unspecified(bound_host):
            own.add(bound_host.strip("[]").lower())
        return cls(frozenset(own), frozenset(split_allowed(a) for a in allowed),
                   frozenset(o.rstrip("/").lower() for o in origins))

    def names_this_server(self, host: str, port: int | None, bound_port: int | None) -> bool:
        host = host.lower().rstrip(".")
        if host in self.own and port == bound_port:
            return True
        for name, wanted in self.extra:
            if wanted is not None and wanted != port:
                continue
            if name == "*" or host == name or (
                    name.startswith("*.") and host.endswith(name[1:])):
                return True
        return False


def split_allowed(entry: str) -> tuple[str, int | None]:
    """``"maiden.example.com"`` -> any port; ``"maiden.example.com:8443"``; ``"[::1]:80"``."""
    entry = entry.strip().lower()
    if entry == "*":
        return ("*", None)
    wildcard = entry.startswith("*.")
    bare = entry[2:] if wildcard else entry
    if not HOST_CHARS.fullmatch(bare):
        raise ValueError(f"{entry!r} is not a host name, name:port or *.domain")
    parts = urlsplit(f"//{bare}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{entry!r} has no valid port") from None
    if parts.hostname is None:
        raise ValueError(f"{entry!r} is not a host name, name:port or *.domain")
    return (f"*.{parts.hostname}" if wildcard else parts.hostname, port)


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""
