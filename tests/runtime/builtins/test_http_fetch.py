"""http_fetch: the tool against a real aiohttp site on loopback (its address rules:
``test_netcheck``).

No test sends a packet anywhere but 127.0.0.1. Names come from an injected resolver (a
table), so "intranet.test resolves to 10.0.0.1" costs no traffic; a refusal test hands the
tool ``NoNetwork``, a transport that fails the test if anything is sent at all. To fetch a
name that resolves to a *public* address (so that ``allow_private = false`` lets the first
hop through, as in "a redirect from an allowed host to loopback"), the tool is given
``ToLoopback``: a transport that records the address the tool chose to connect to, then
delivers the request to the local site instead. It stands in for the network, not for our
code: every check the tool makes still runs, and the record shows it connected to the address
it checked, with the name only in ``Host``.
"""

from __future__ import annotations

import asyncio
import codecs
import gzip
import socket
import ssl
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from aiohttp import web

from runtime import RunState, ToolResult
from runtime.builtins import builtin_tools
from runtime.builtins.http_fetch import FetchError, FetchRefused, make_http_fetch
from runtime.model.config import HttpFetchConfig, ToolsConfig
from runtime.tools.base import Tool
from tests.fakes.site import loopback_runner, serve_on_loopback
from tests.samples import PAGE, PAGE_TEXT

pytestmark = pytest.mark.timeout(30)

PUBLIC_IP = "93.184.215.14"
"""A public address a test name resolves to; only ever "reached" through ``ToLoopback``."""

# -- a real site on loopback ---------------------------------------------------------------

class Site:
    """An aiohttp server on 127.0.0.1 (TLS if given a context) that records each request."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.port = 0
        self.seen: list[tuple[str, str]] = []
        """(path, Host header) of every request."""
        self._runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    async def __aenter__(self) -> Site:
        app = web.Application()
        app.router.add_get("/{name:.*}", self._handle)
        self._runner = loopback_runner(app)
        await self._runner.setup()
        self.port = await serve_on_loopback(self._runner, ssl_context=self.tls)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path, request.headers.get("host", "")))
        name = request.match_info["name"]
        html = "text/html; charset=utf-8"
        if name == "page":
            return web.Response(body=PAGE, headers={"content-type": html})
        if name == "latin1":
            return web.Response(body="café crème".encode("latin-1"),
                                headers={"content-type": "text/plain; charset=iso-8859-1"})
        if name == "meta-charset":
            body = '<meta charset="windows-1252"><p>naïve “quoted” 5€</p>'.encode("cp1252")
            return web.Response(body=body, headers={"content-type": "text/html"})
        if name == "json":
            return web.Response(body=b'{"a": [1, 2]}', headers={"content-type":
                                                                 "application/json"})
        if name == "big":
            return web.Response(body=b"0123456789" * 500, headers={"content-type":
                                                                   "text/plain"})
        if name == "image":
            return web.Response(body=b"\x89PNG\r\n\x1a\n\0\0\0", headers={"content-type":
                                                                          "image/png"})
        if name == "missing":
            return web.Response(status=404, body=b"<title>Not here</title><p>gone</p>",
                                headers={"content-type": html})
        if name == "slow":
            await asyncio.Event().wait()  # until the client gives up and the server closes
        location = {"redirect": "/page", "loop": "/loop",
                    "to-loopback": f"http://127.0.0.1:{self.port}/page",
                    "to-intranet": "http://intranet.test/",
                    "to-file": "file:///etc/passwd"}.get(name)
        if location is None:
            return web.Response(status=418)
        return web.Response(status=302, headers={"location": location})


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as s:
        yield s


class Names:
    """A resolver from a table; records every lookup. Unknown names fail as DNS would."""

    def __init__(self, table: dict[str, Sequence[str] | Iterator[list[str]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return next(answer) if isinstance(answer, Iterator) else list(answer)


class NoNetwork(httpx.AsyncBaseTransport):
    """Fails the test if the tool sends anything: for URLs it must refuse first."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a refused URL reached the network: {request.url}")


class ToLoopback(httpx.AsyncBaseTransport):
    """Records where the tool meant to connect, then delivers the request to the local site."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.sent: list[tuple[str, str, str | None]] = []
        """(URL the tool connected to, its Host header, its TLS server name)."""
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((str(request.url), request.headers["host"],
                          request.extensions.get("sni_hostname")))
        local = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.site.port)
        return await self._inner.handle_async_request(
            httpx.Request("GET", local, headers=request.headers))

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def to_loopback(site: Site) -> AsyncIterator[ToLoopback]:
    transport = ToLoopback(site)
    try:
        yield transport
    finally:
        await transport.aclose()


def fetcher(resolver: Names | None = None, transport: httpx.AsyncBaseTransport | None = None,
            **settings: Any) -> Tool:
    return make_http_fetch(HttpFetchConfig(**settings), resolver=resolver, transport=transport)


async def fetch(tool: Tool, url: str) -> dict[str, Any]:
    result: dict[str, Any] = await tool.fn(url=url)
    return result


async def refusal(tool: Tool, url: str) -> str:
    with pytest.raises(FetchRefused) as caught:
        await fetch(tool, url)
    assert isinstance(caught.value, ValueError)
    return str(caught.value)


# -- the tool ------------------------------------------------------------------------------

def test_the_tool_is_read_only_and_outlasts_its_own_deadline(tmp_path: Path) -> None:
    tool = fetcher(timeout_s=7)
    assert tool.name == "http_fetch" and tool.effect == "read_only"
    assert not tool.requires_approval
    assert tool.timeout_s > 7
    assert tool.spec.parameters["required"] == ["url"]
    assert tool.spec.parameters["properties"]["url"] == {"type": "string"}
    [built] = builtin_tools(ToolsConfig(builtins=["http_fetch"]), tmp_path)
    assert built.name == "http_fetch" and built.effect == "read_only"


async def test_an_html_page_comes_back_as_text(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True), site.url("/page"))
    assert result == {"url": site.url("/page"), "status": 200, "content_type": "text/html",
                      "title": "The Example Page", "text": PAGE_TEXT, "truncated": False,
                      "note": None}
    assert site.seen == [("/page", f"127.0.0.1:{site.port}")]


@pytest.mark.parametrize(("path", "content_type", "text"), [
    ("/latin1", "text/plain", "café crème"),
    ("/meta-charset", "text/html", "naïve “quoted” 5€"),
    ("/json", "application/json", '{"a": [1, 2]}'),
])
async def test_text_is_decoded_by_its_charset(site: Site, path: str, content_type: str,
                                              text: str) -> None:
    result = await fetch(fetcher(allow_private=True), site.url(path))
    assert (result["content_type"], result["text"], result["title"]) == (content_type, text, None)


async def test_an_error_status_is_a_result_not_an_error(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True), site.url("/missing"))
    assert (result["status"], result["title"], result["text"]) == (404, "Not here", "gone")


async def test_the_body_is_read_up_to_max_bytes(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True, max_bytes=1234), site.url("/big"))
    assert result["truncated"] and result["text"] == ("0123456789" * 124)[:1234]
    assert result["note"] == "the body was cut at 1234 bytes ([tools.http_fetch] max_bytes)"


async def test_the_text_is_cut_at_max_chars(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True, max_chars=100), site.url("/big"))
    assert result["truncated"] and result["text"] == "0123456789" * 10
    assert result["note"] == "the text was cut at 100 characters ([tools.http_fetch] max_chars)"


async def test_a_binary_body_is_not_read(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True), site.url("/image"))
    assert result == {"url": site.url("/image"), "status": 200, "content_type": "image/png",
                      "title": None, "text": "", "truncated": False,
                      "note": "image/png is not text: the body was not read"}


async def test_a_redirect_is_followed(site: Site) -> None:
    result = await fetch(fetcher(allow_private=True), site.url("/redirect"))
    assert result["url"] == site.url("/page") and result["title"] == "The Example Page"
    assert [path for path, _ in site.seen] == ["/redirect", "/page"]


async def test_redirects_stop_at_max_redirects(site: Site) -> None:
    with pytest.raises(FetchError, match=r"stopped after 2 redirects"):
        await fetch(fetcher(allow_private=True, max_redirects=2), site.url("/loop"))
    assert [path for path, _ in site.seen] == ["/loop"] * 3


async def test_a_redirect_to_another_scheme_is_refused(site: Site) -> None:
    message = await refusal(fetcher(allow_private=True), site.url("/to-file"))
    assert message == (f"refused: only http and https URLs are fetched, not file: URLs; "
                       f"{site.url('/to-file')} redirected to file:/etc/passwd")


async def test_the_whole_fetch_is_bounded_by_timeout_s(site: Site) -> None:
    with pytest.raises(FetchError, match=r"gave no complete answer within 0.2 s"):
        await fetch(fetcher(allow_private=True, timeout_s=0.2), site.url("/slow"))


async def test_a_connection_failure_is_an_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(FetchError, match=r"cannot fetch http://127.0.0.1:\d+/: ConnectError"):
        await fetch(fetcher(allow_private=True), f"http://127.0.0.1:{port}/")


def served(response: httpx.Response) -> tuple[Names, httpx.MockTransport]:
    """``public.test`` (a public address) answering every request with ``response``."""
    return Names({"public.test": [PUBLIC_IP]}), httpx.MockTransport(lambda request: response)


@pytest.mark.parametrize(("response", "text", "note"), [
    (httpx.Response(200, content=b"plain words"), "plain words", None),
    (httpx.Response(200, content=b"\x00\x01\x02binary"), "",
     "no content type and the body looks binary: not shown"),
    (httpx.Response(200, content=codecs.BOM_UTF16_LE + "ünïcode".encode("utf-16-le"),
                    headers={"content-type": "text/plain; charset=iso-8859-1"}), "ünïcode", None),
    (httpx.Response(200, content=b"caf\xe9", headers={"content-type": "text/plain; charset=nope"}),
     "caf\ufffd", None),
])
async def test_bodies_without_a_clear_type_or_charset(response: httpx.Response, text: str,
                                                      note: str | None) -> None:
    result = await fetch(fetcher(*served(response)), "http://public.test/")
    assert (result["text"], result["note"]) == (text, note)


async def test_max_bytes_counts_the_decompressed_body() -> None:
    bomb = httpx.Response(200, content=gzip.compress(b"0" * 1_000_000), headers={
        "content-type": "text/plain", "content-encoding": "gzip"})
    result = await fetch(fetcher(*served(bomb), max_bytes=1000), "http://public.test/")
    assert result["truncated"] and result["text"] == "0" * 1000


# -- refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "names", "message"), [
    ("http://127.0.0.1/", {}, "refused: 127.0.0.1 is a loopback address"),
    ("http://127.0.0.1:8080/admin", {}, "refused: 127.0.0.1 is a loopback address"),
    ("https://[::1]/", {}, "refused: ::1 is a loopback address"),
    ("http://2130706433/", {},
     "refused: 127.0.0.1 is a loopback address (2130706433 is another way to write it)"),
    ("http://127.1/", {}, "refused: 127.0.0.1 is a loopback address (127.1 is another way to "
                          "write it)"),
    ("http://0x7f.1/", {}, "refused: 127.0.0.1 is a loopback address (0x7f.1 is another way "
                           "to write it)"),
    # httpx itself rejects a dotted quad with a leading zero, and any part over 255
    ("http://0177.0.0.1/", {}, "refused: 'http://0177.0.0.1/' is not a valid URL"),
    ("http://256.1.1.1/", {}, "refused: 'http://256.1.1.1/' is not a valid URL"),
    ("http://0177.1/", {}, "refused: 127.0.0.1 is a loopback address (0177.1 is another way "
                           "to write it)"),
    ("http://[::ffff:127.0.0.1]/", {},
     "refused: ::ffff:7f00:1 is a loopback address (127.0.0.1 written as IPv6)"),
    ("http://localhost/", {"localhost": ["127.0.0.1", "::1"]},
     "refused: 127.0.0.1 is a loopback address (localhost resolves to it)"),
    ("http://intranet.test/wiki", {"intranet.test": ["10.0.0.1"]},
     "refused: 10.0.0.1 is a private address (intranet.test resolves to it)"),
    ("http://metadata.test/latest/meta-data/", {"metadata.test": ["169.254.169.254"]},
     "refused: 169.254.169.254 is a cloud metadata address (metadata.test resolves to it)"),
    ("http://169.254.169.254/latest/meta-data/", {},
     "refused: 169.254.169.254 is a cloud metadata address"),
    ("http://0xA9.0xFE.0xA9.0xFE/", {},
     "refused: 169.254.169.254 is a cloud metadata address (0xa9.0xfe.0xa9.0xfe is another "
     "way to write it)"),
    # every address is checked, not only the first
    ("http://mixed.test/", {"mixed.test": [PUBLIC_IP, "10.0.0.1"]},
     "refused: 10.0.0.1 is a private address (mixed.test resolves to it)"),
    ("http://v6.test/", {"v6.test": ["2606:4700::1111", "fd00::1"]},
     "refused: fd00::1 is a private address (v6.test resolves to it)"),
    ("http://0.0.0.0:8000/", {}, "refused: 0.0.0.0 is an unspecified address"),
    ("http://[fe80::1]/", {}, "refused: fe80::1 is a link-local address"),
    ("http://224.0.0.1/", {}, "refused: 224.0.0.1 is a multicast address"),
    ("http://100.64.0.1/", {}, "refused: 100.64.0.1 is a shared (carrier-grade NAT) address"),
    # what browsers reject as an address, never sent to DNS as a name
    ("http://foo.123/", {}, "refused: foo.123 is not a valid IPv4 address"),
    ("http://1.2.3.4.5/", {}, "refused: 1.2.3.4.5 is not a valid IPv4 address"),
    ("file:///etc/passwd", {}, "refused: only http and https URLs are fetched, not file: URLs"),
    ("ftp://example.test/", {}, "refused: only http and https URLs are fetched, not ftp: URLs"),
    ("example.test/page", {},
     "refused: only http and https URLs are fetched, not URLs without one"),
    ("http://user:secret@example.test/", {}, "refused: the URL has a user name or password"),
    ("http:///path", {}, "refused: the URL has no host"),
])
async def test_refusals(url: str, names: dict[str, Sequence[str]], message: str) -> None:
    resolver = Names(dict(names))
    got = await refusal(fetcher(resolver, NoNetwork()), url)
    assert got.startswith(message), got
    # a host written as an address is never looked up
    assert resolver.asked == list(names)[:1]


async def test_localhost_is_refused_with_the_system_resolver() -> None:
    got = await refusal(fetcher(transport=NoNetwork()), "http://localhost:9/")
    assert got.startswith("refused: 127.0.0.1 is a loopback address (localhost resolves to it)")


@pytest.mark.parametrize("url", ["http://169.254.169.254/", "http://[fd00:ec2::254]/",
                                 "http://[::ffff:169.254.169.254]/", "http://metadata.test/"])
async def test_metadata_is_refused_even_with_allow_private(url: str) -> None:
    resolver = Names({"metadata.test": ["169.254.169.254"]})
    got = await refusal(fetcher(resolver, NoNetwork(), allow_private=True), url)
    assert "is a cloud metadata address" in got


async def test_host_lists_are_applied_before_any_lookup() -> None:
    resolver = Names({"evil.test": [PUBLIC_IP]})
    tool = fetcher(resolver, NoNetwork(), deny_hosts=["evil.test"],
                   allow_hosts=[".example.test"])
    assert await refusal(tool, "http://evil.test/") == \
        "refused: evil.test is in [tools.http_fetch] deny_hosts"
    assert await refusal(tool, "http://other.test/") == \
        "refused: other.test is not in [tools.http_fetch] allow_hosts"
    assert resolver.asked == []


async def test_an_allowed_host_is_still_checked_by_address() -> None:
    resolver = Names({"wiki.example.test": ["192.168.0.10"]})
    tool = fetcher(resolver, NoNetwork(), allow_hosts=[".example.test"])
    assert await refusal(tool, "http://wiki.example.test/") == \
        "refused: 192.168.0.10 is a private address (wiki.example.test resolves to it)"


async def test_a_name_that_does_not_resolve_is_an_error() -> None:
    with pytest.raises(FetchError, match=r"cannot resolve nowhere.test: .*not known") as caught:
        await fetch(fetcher(Names({}), NoNetwork()), "http://nowhere.test/")
    assert not isinstance(caught.value, FetchRefused)


# -- connecting to the checked address, hop by hop ------------------------------------------

async def test_the_tool_connects_to_the_address_it_checked(site: Site) -> None:
    """The name is resolved once; the connection goes to that address, the name only in
    ``Host``. A second, different answer (DNS rebinding) is never asked for."""
    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])
    resolver = Names({"public.test": answers})
    async with to_loopback(site) as transport:
        result = await fetch(fetcher(resolver, transport), "http://public.test/page?q=1#top")
    assert result["status"] == 200 and result["title"] == "The Example Page"
    assert result["url"] == "http://public.test/page?q=1#top"
    assert transport.sent == [(f"http://{PUBLIC_IP}/page?q=1", "public.test", None)]
    assert resolver.asked == ["public.test"]
    assert site.seen == [("/page", "public.test")]


async def test_https_names_the_host_for_tls(site: Site) -> None:
    resolver = Names({"public.test": [PUBLIC_IP]})
    async with to_loopback(site) as transport:
        result = await fetch(fetcher(resolver, transport), "https://public.test:8443/page")
    assert result["url"] == "https://public.test:8443/page"
    assert transport.sent == [(f"https://{PUBLIC_IP}:8443/page", "public.test:8443",
                               "public.test")]


async def test_a_redirect_from_an_allowed_host_to_loopback_is_refused(site: Site) -> None:
    resolver = Names({"public.test": [PUBLIC_IP]})
    async with to_loopback(site) as transport:
        got = await refusal(fetcher(resolver, transport), "http://public.test/to-loopback")
    assert got == (f"refused: 127.0.0.1 is a loopback address; http://public.test/to-loopback "
                   f"redirected to http://127.0.0.1:{site.port}/page")
    assert transport.sent == [(f"http://{PUBLIC_IP}/to-loopback", "public.test", None)]
    assert site.seen == [("/to-loopback", "public.test")]


async def test_a_redirect_to_a_private_name_is_refused(site: Site) -> None:
    resolver = Names({"public.test": [PUBLIC_IP], "intranet.test": ["10.0.0.1"]})
    async with to_loopback(site) as transport:
        got = await refusal(fetcher(resolver, transport), "http://public.test/to-intranet")
    assert got == ("refused: 10.0.0.1 is a private address (intranet.test resolves to it); "
                   "http://public.test/to-intranet redirected to http://intranet.test/")
    assert len(transport.sent) == 1


async def test_each_hop_is_resolved_and_checked_again(site: Site) -> None:
    """A redirect to the same name looks it up again; a rebound answer is refused there."""
    resolver = Names({"public.test": iter([[PUBLIC_IP], ["127.0.0.1"]])})
    async with to_loopback(site) as transport:
        got = await refusal(fetcher(resolver, transport), "http://public.test/redirect")
    assert got == ("refused: 127.0.0.1 is a loopback address (public.test resolves to it); "
                   "http://public.test/redirect redirected to http://public.test/page")
    assert resolver.asked == ["public.test", "public.test"] and len(transport.sent) == 1


# -- TLS: the certificate is verified for the name, not the address --------------------------

@contextmanager
def tls_pair(*names: str) -> Iterator[tuple[ssl.SSLContext, ssl.SSLContext, list[str]]]:
    """(server context with a certificate for ``names``, client context trusting its CA,
    the server names clients asked for)."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(server)
    asked: list[str] = []

    def record(sock: Any, name: str | None, context: Any) -> None:
        asked.append(name or "")

    server.sni_callback = record
    client = ssl.create_default_context()
    ca.configure_trust(client)
    yield server, client, asked


async def test_https_to_the_checked_address_verifies_the_name() -> None:
    """The tool connects to 127.0.0.1 and still checks the certificate for the name.

    One transport per fetch, as the tool makes one per hop when none is injected: a pool
    shared by both fetches would hand the second one the first one's verified connection."""
    names = Names({"public.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    with tls_pair("public.test") as (server, client, asked):
        async with Site(tls=server) as tls_site:
            async with httpx.AsyncHTTPTransport(verify=client) as transport:
                tool = fetcher(names, transport, allow_private=True)
                result = await fetch(tool, f"https://public.test:{tls_site.port}/page")
            assert result["title"] == "The Example Page"
            assert tls_site.seen == [("/page", f"public.test:{tls_site.port}")]
            assert asked == ["public.test"]
            async with httpx.AsyncHTTPTransport(verify=client) as transport:
                tool = fetcher(names, transport, allow_private=True)
                with pytest.raises(FetchError, match="CERTIFICATE_VERIFY_FAILED"):
                    await fetch(tool, f"https://other.test:{tls_site.port}/page")
            assert asked == ["public.test", "other.test"]


# -- through the loop ----------------------------------------------------------------------

def calls(*urls: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "http_fetch", "arguments": {"url": u}} for u in urls]}


async def run_fetches(make_runtime: Any, tool: Tool, *urls: str) -> list[ToolResult]:
    async with make_runtime([calls(*urls), {"text": "done"}], [tool]) as (rt, provider):
        run = await rt.send("t", "read these")
        entries = await rt.records.entries("t")
        provider.assert_complete()
    assert run.state is RunState.COMPLETED and run.reply == "done"
    order = {c.id: i for i, c in enumerate(entries[1].tool_calls)}
    return sorted((e for e in entries if isinstance(e, ToolResult)),
                  key=lambda e: order[e.tool_call_id])


async def test_through_the_loop_a_page_and_a_refusal(make_runtime: Any, site: Site) -> None:
    page, metadata = site.url("/page"), "http://169.254.169.254/latest/meta-data/"
    fetched, refused = await run_fetches(make_runtime, fetcher(allow_private=True),
                                         page, metadata)
    assert not fetched.is_error
    assert fetched.content == {"url": page, "status": 200, "content_type": "text/html",
                               "title": "The Example Page", "text": PAGE_TEXT,
                               "truncated": False, "note": None}
    assert refused.is_error
    assert refused.content == {"error": {"type": "exception", "message":
        "refused: 169.254.169.254 is a cloud metadata address"}}


async def test_through_the_loop_loopback_is_refused_by_default(make_runtime: Any,
                                                               site: Site) -> None:
    [refused] = await run_fetches(make_runtime, fetcher(), site.url("/page"))
    assert refused.is_error
    assert refused.content == {"error": {"type": "exception", "message":
        "refused: 127.0.0.1 is a loopback address"}}
    assert site.seen == []
