"""Which addresses and hosts ``http_fetch`` may reach: pure functions, table-tested.

``address_problem`` says why an address is not a public internet address (loopback,
private, link-local, multicast, reserved, cloud metadata; IPv6 forms that carry an IPv4
address judged by that address); ``numeric_host`` reads a host written as a number the way
browsers do (``2130706433``, ``127.1``, ``0x7f.1`` are 127.0.0.1); ``host_problem``
applies ``allow_hosts`` / ``deny_hosts`` (deny wins).
"""

from __future__ import annotations

import string
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

__all__ = ["IPAddress", "address_problem", "host_problem", "is_metadata", "numeric_host"]

IPAddress = IPv4Address | IPv6Address

_LOOPBACK = "a loopback address"
_PRIVATE = "a private address"
_LINK_LOCAL = "a link-local address"
_MULTICAST = "a multicast address"
_UNSPECIFIED = "an unspecified address"
_RESERVED = "a reserved address"
_METADATA = "a cloud metadata address"

_V4: list[tuple[IPv4Network, str]] = [(IPv4Network(net), why) for net, why in [
    ("169.254.169.254/32", _METADATA),  # AWS, GCP, Azure, OpenStack...
    ("169.254.170.2/32", _METADATA),    # AWS ECS task credentials
    ("100.100.100.200/32", _METADATA),  # Alibaba Cloud
    ("0.0.0.0/32", _UNSPECIFIED),
    ("0.0.0.0/8", _RESERVED),           # "this network": Linux connects 0.x to the host itself
    ("127.0.0.0/8", _LOOPBACK),
    ("10.0.0.0/8", _PRIVATE),
    ("172.16.0.0/12", _PRIVATE),
    ("192.168.0.0/16", _PRIVATE),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("169.254.0.0/16", _LINK_LOCAL),
    ("192.0.0.0/24", _RESERVED),        # IETF protocol assignments
    ("192.0.2.0/24", _RESERVED),        # documentation
    ("198.51.100.0/24", _RESERVED),     # documentation
    ("203.0.113.0/24", _RESERVED),      # documentation
    ("198.18.0.0/15", _RESERVED),       # benchmarking
    ("192.88.99.0/24", _RESERVED),      # the old 6to4 relay anycast
    ("224.0.0.0/4", _MULTICAST),
    ("255.255.255.255/32", "a broadcast address"),
    ("240.0.0.0/4", _RESERVED),
]]
_V6: list[tuple[IPv6Network, str]] = [(IPv6Network(net), why) for net, why in [
    ("fd00:ec2::254/128", _METADATA),   # AWS over IPv6
    ("::/128", _UNSPECIFIED),
    ("::1/128", _LOOPBACK),
    ("64:ff9b:1::/48", _PRIVATE),       # local-use NAT64
    ("fc00::/7", _PRIVATE),             # unique local
    ("fec0::/10", _PRIVATE),            # site-local (deprecated)
    ("fe80::/10", _LINK_LOCAL),
    ("ff00::/8", _MULTICAST),
    ("2001::/23", _RESERVED),           # protocol assignments, Teredo among them
    ("2001:db8::/32", _RESERVED),       # documentation
    ("3fff::/20", _RESERVED),           # documentation (RFC 9637)
]]
_NAT64 = IPv6Network("64:ff9b::/96")
_V4_COMPATIBLE = IPv6Network("::/96")
_GLOBAL_UNICAST = IPv6Network("2000::/3")


def address_problem(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be fetched ("a loopback address"), or None for a public address."""
    if isinstance(ip, IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner)
            if problem is not None:
                return f"{problem} ({inner} written as IPv6)"
            if ip.ipv4_mapped is not None or ip in _NAT64:
                return None  # how a dual-stack socket or a NAT64 network reaches a public IPv4
        for net6, why in _V6:
            if ip in net6:
                return why
        return None if ip in _GLOBAL_UNICAST and ip.is_global else _RESERVED
    for net4, why in _V4:
        if ip in net4:
            return why
    return None if ip.is_global else _RESERVED  # anything else IANA lists as not global


def is_metadata(ip: IPAddress) -> bool:
    """A cloud metadata address, in any form (never fetched, even with ``allow_private``)."""
    inner = _embedded_ipv4(ip) if isinstance(ip, IPv6Address) else None
    if inner is not None:
        ip = inner
    table = _V4 if isinstance(ip, IPv4Address) else _V6
    return any(ip in net for net, why in table if why == _METADATA)


def _embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries: mapped, compatible, 6to4 or NAT64."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _V4_COMPATIBLE and int(ip) > 1):
        return IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def numeric_host(host: str) -> IPAddress | None:
    """The address a host written as a number means, or None for a name.

    IPv4 is read as browsers do (the WHATWG URL standard, a superset of ``inet_aton``): one to
    four dot-separated parts, each decimal, octal (leading ``0``) or hex (``0x``), the last
    filling the remaining bytes, so ``2130706433``, ``127.1`` and ``0x7f.0.0.1`` all mean
    127.0.0.1. A host whose last label is a number but which is no valid address (``256.1.1.1``)
    raises ``ValueError``: browsers reject it, and it must not be sent to DNS as a name.
    """
    if ":" in host:
        return ip_address(host.strip("[]"))
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if _ipv4_part(parts[-1]) is None and not _DECIMAL.issuperset(parts[-1] or "x"):
        return None  # a name: its last label is not a number
    numbers = [_ipv4_part(part) for part in parts]
    if len(numbers) > 4 or None in numbers:
        raise ValueError(f"{host} is not a valid IPv4 address")
    *head, last = [n for n in numbers if n is not None]
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise ValueError(f"{host} is not a valid IPv4 address")
    return IPv4Address(last + sum(n << (8 * (3 - i)) for i, n in enumerate(head)))


_DECIMAL = frozenset(string.digits)
_DIGITS = {16: frozenset(string.hexdigits), 8: frozenset(string.octdigits), 10: _DECIMAL}


def _ipv4_part(part: str) -> int | None:
    """One part of a numeric IPv4 host: ``0x`` hex, ``0`` octal or decimal; None if not."""
    if part[:2].lower() == "0x":
        digits, base = part[2:] or "0", 16
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    return int(digits, base) if digits and _DIGITS[base].issuperset(digits) else None


# -- hosts ---------------------------------------------------------------------------------

def host_problem(host: str, allow_hosts: list[str], deny_hosts: list[str]) -> str | None:
    """Why the lists refuse ``host``, or None. An entry is a host, or ``.example.com`` for
    every subdomain of example.com (not example.com itself); ``deny_hosts`` wins."""
    if any(_listed(host, entry) for entry in deny_hosts):
        return f"{host} is in [tools.http_fetch] deny_hosts"
    if allow_hosts and not any(_listed(host, entry) for entry in allow_hosts):
        return f"{host} is not in [tools.http_fetch] allow_hosts"
    return None


def _listed(host: str, entry: str) -> bool:
    entry = _canonical(entry)
    return host.endswith(entry) if entry.startswith(".") else host == entry


def _canonical(host: str) -> str:
    """A host as lists compare it: lower case, no final dot, an address in its usual form."""
    host = host.lower().rstrip(".")
    try:
        ip = numeric_host(host) if not host.startswith(".") else None
    except ValueError:
        ip = None
    return host if ip is None else str(ip)
