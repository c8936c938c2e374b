"""The address rules of ``http_fetch`` (runtime/builtins/netcheck.py), by tables: which
addresses are not public and why, hosts written as numbers read as ``inet_aton`` reads
them, and the ``allow_hosts`` / ``deny_hosts`` lists."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, ip_address

import pytest

from runtime.builtins.netcheck import address_problem, host_problem, numeric_host

# -- the address classifier ----------------------------------------------------------------

REFUSED_ADDRESSES = [
    ("127.0.0.1", "a loopback address"),
    ("127.255.255.254", "a loopback address"),
    ("10.0.0.1", "a private address"),
    ("172.16.5.4", "a private address"),
    ("172.31.255.255", "a private address"),
    ("192.168.1.1", "a private address"),
    ("169.254.1.1", "a link-local address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("169.254.170.2", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
    ("100.64.0.1", "a shared (carrier-grade NAT) address"),
    ("100.127.255.255", "a shared (carrier-grade NAT) address"),
    ("0.0.0.0", "an unspecified address"),
    ("0.1.2.3", "a reserved address"),
    ("224.0.0.1", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("255.255.255.255", "a broadcast address"),
    ("240.0.0.1", "a reserved address"),
    ("192.0.0.8", "a reserved address"),
    ("192.0.2.1", "a reserved address"),
    ("198.18.0.1", "a reserved address"),
    ("198.51.100.7", "a reserved address"),
    ("203.0.113.9", "a reserved address"),
    ("::1", "a loopback address"),
    ("::", "an unspecified address"),
    ("fe80::1", "a link-local address"),
    ("febf::1", "a link-local address"),
    ("fc00::1", "a private address"),
    ("fd12:3456::1", "a private address"),
    ("fec0::1", "a private address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("ff02::1", "a multicast address"),
    ("ff05::2", "a multicast address"),
    ("2001:db8::1", "a reserved address"),
    ("3fff::1", "a reserved address"),
    ("100::1", "a reserved address"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "a reserved address"),  # Teredo
    ("64:ff9b:1::1", "a private address"),
    ("5f00::1", "a reserved address"),
    ("::8.8.8.8", "a reserved address"),  # IPv4-compatible: deprecated, never routed
    # IPv4 in IPv6 clothing is judged as the IPv4 address it carries.
    ("::ffff:127.0.0.1", "a loopback address (127.0.0.1 written as IPv6)"),
    ("::ffff:7f00:1", "a loopback address (127.0.0.1 written as IPv6)"),
    ("::ffff:10.0.0.1", "a private address (10.0.0.1 written as IPv6)"),
    ("::ffff:169.254.169.254", "a cloud metadata address (169.254.169.254 written as IPv6)"),
    ("::ffff:0.0.0.0", "an unspecified address (0.0.0.0 written as IPv6)"),
    ("::127.0.0.1", "a loopback address (127.0.0.1 written as IPv6)"),
    ("2002:7f00:1::", "a loopback address (127.0.0.1 written as IPv6)"),  # 6to4
    ("2002:a9fe:a9fe::1", "a cloud metadata address (169.254.169.254 written as IPv6)"),
    ("64:ff9b::7f00:1", "a loopback address (127.0.0.1 written as IPv6)"),  # NAT64
    ("64:ff9b::a00:1", "a private address (10.0.0.1 written as IPv6)"),
]

PUBLIC_ADDRESSES = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "172.32.0.1", "172.15.255.255",
                    "100.128.0.1", "100.63.255.255", "169.255.0.1", "11.0.0.1", "223.255.255.1",
                    "2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::200e",
                    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]


@pytest.mark.parametrize(("address", "problem"), REFUSED_ADDRESSES)
def test_non_public_addresses_are_named(address: str, problem: str) -> None:
    assert address_problem(ip_address(address)) == problem


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ip_address(address)) is None


# -- hosts written as numbers --------------------------------------------------------------

NUMERIC_HOSTS = [
    ("127.0.0.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("0X7F.1", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("127.0.0.1.", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("0x", "0.0.0.0"),
    ("10.1", "10.0.0.1"),
    ("167772161", "10.0.0.1"),
    ("0xA9.0xFE.0xA9.0xFE", "169.254.169.254"),
    ("0251.0376.0251.0376", "169.254.169.254"),
    ("169.16689662", "169.254.169.254"),
    ("4294967295", "255.255.255.255"),
    ("::1", "::1"),
    ("[::1]", "::1"),
    ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
]


@pytest.mark.parametrize(("host", "address"), NUMERIC_HOSTS)
def test_numeric_hosts_mean_an_address(host: str, address: str) -> None:
    assert numeric_host(host) == ip_address(address)


@pytest.mark.parametrize("host", ["2130706433", "127.1", "127.0.1", "0x7f.1", "0X7F.1",
                                  "0x7f000001", "0177.0.0.1", "017700000001", "0", "10.1",
                                  "0xA9.0xFE.0xA9.0xFE", "169.16689662", "1.2.3.4"])
def test_numeric_hosts_read_as_inet_aton_reads_them(host: str) -> None:
    assert numeric_host(host) == IPv4Address(socket.inet_aton(host))


@pytest.mark.parametrize("host", ["example.com", "localhost", "a.b.c", "1.2.3.example",
                                  "0x0x1", "127.0.0.1.nip.io", "xn--bcher-kva.example", ""])
def test_names_are_not_numbers(host: str) -> None:
    assert numeric_host(host) is None


@pytest.mark.parametrize("host", ["256.1.1.1", "1.2.3.4.5", "4294967296", "08", "1..2",
                                  "foo.123", "127.0.0.0x100", "1.0x1ffffff"])
def test_numbers_that_are_no_address_are_errors(host: str) -> None:
    with pytest.raises(ValueError, match="is not a valid IPv4 address"):
        numeric_host(host)


# -- allow_hosts / deny_hosts --------------------------------------------------------------

@pytest.mark.parametrize(("host", "allow", "deny", "expected"), [
    ("example.com", [], [], None),
    ("evil.example", [], ["evil.example"], "evil.example is in [tools.http_fetch] deny_hosts"),
    ("evil.example", [], ["EVIL.example."], "deny_hosts"),
    ("a.evil.example", [], [".evil.example"], "deny_hosts"),
    ("evil.example", [], [".evil.example"], None),  # '.suffix' means subdomains only
    ("notevil.example", [], [".evil.example"], None),
    ("docs.example.com", [".example.com"], [], None),
    ("example.com", ["example.com"], [], None),
    ("example.com", [".example.com"], [], "example.com is not in [tools.http_fetch] "
                                          "allow_hosts"),
    ("other.org", ["example.com"], [], "allow_hosts"),
    ("x.example.com", [".example.com"], ["x.example.com"], "deny_hosts"),  # deny wins
    ("127.0.0.1", [], ["2130706433"], "deny_hosts"),  # addresses compare as addresses
    ("::1", [], ["[::1]"], "deny_hosts"),
])
def test_host_lists(host: str, allow: list[str], deny: list[str], expected: str | None) -> None:
    problem = host_problem(host, allow, deny)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem
