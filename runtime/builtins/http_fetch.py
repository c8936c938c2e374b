"""``http_fetch``: GET a public URL and hand the model its readable text (``read_only``).

A fetch tool is the classic server-side request forgery hole: the model (or a page it read)
asks for ``http://169.254.169.254/`` or ``http://localhost:6379/`` and the agent reaches what
only the host can reach. So every hop goes:

1. parse the URL: http or https, no user name or password, a host;
2. apply ``allow_hosts`` / ``deny_hosts`` to the host (deny wins);
3. find the host's addresses. A host written as a number is taken as the address it means,
   the way browsers and ``inet_aton`` read it (``2130706433``, ``127.1``, ``0x7f.1`` and
   ``0177.1`` are all 127.0.0.1; httpx itself rejects ``0177.0.0.1``); any other name goes
   to the resolver;
4. refuse unless *every* address is public (``address_problem``). IPv6 forms that carry an
   IPv4 address (``::ffff:127.0.0.1``, 6to4, NAT64) are judged by that address;
5. connect to the checked address itself: the request goes to ``scheme://IP:port/...`` with
   ``Host`` set to the real name and, for https, the TLS server name (SNI) set to it as well,
   so the certificate is still verified for the name. The name is never resolved again, so a
   DNS answer that changes between the check and the connection (rebinding) cannot bite;
6. a redirect is not followed by httpx: its ``Location`` goes through the same steps.

Every hop has a fresh connection pool, so a TLS connection verified for one name is never
reused for another, and nothing (cookies, proxies from the environment) carries over.
``allow_private = true`` lifts step 4, except for the cloud metadata addresses, which are
never fetched. The body is streamed and read up to ``max_bytes``, the whole fetch (redirects
included) bounded by ``timeout_s``; HTML is reduced to text with beautifulsoup4.
"""

from __future__ import annotations

import asyncio
import codecs
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import lru_cache
from ipaddress import IPv4Address, ip_address
from typing import Any

import httpx
from bs4.dammit import EncodingDetector

from ..errors import ToolFailure
from ..model.config import HttpFetchConfig
from ..model.html_text import html_to_text
from ..tools.base import Tool
from .netcheck import IPAddress, address_problem, host_problem, is_metadata, numeric_host

__all__ = ["FetchError", "FetchRefused", "Resolver", "make_http_fetch"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``, as IP strings; raises ``OSError`` when the name is unknown."""


class FetchError(ToolFailure):
    """The URL could not be fetched: no connection, a TLS failure, too many redirects..."""


class FetchRefused(FetchError, ValueError):
    """The URL is not one this tool may fetch; the message starts with ``refused:``."""


# -- the tool ------------------------------------------------------------------------------

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript",
                         "application/ecmascript", "application/x-javascript",
                         "application/yaml", "application/x-yaml", "application/toml",
                         "application/x-ndjson", "application/sql", "application/graphql"})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_HEADERS = {"user-agent": "maiden-http_fetch/1",
            "accept": "text/html, text/*;q=0.9, application/json;q=0.9, */*;q=0.5",
            "accept-encoding": "gzip, deflate"}


def make_http_fetch(
    cfg: HttpFetchConfig,
    *,
    resolver: Resolver | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Tool:
    """The ``http_fetch`` tool with ``[tools.http_fetch]`` settings.

    ``resolver`` replaces the system's ``getaddrinfo``; ``transport`` the connections httpx
    makes (a test's, owned by the caller). Both exist for tests: the checks never change.
    """
    fetcher = _Fetcher(cfg, resolver or _system_resolver, transport)
    # A few seconds above our own deadline, so that the model reads our message, not the loop's.
    return Tool(fetcher.http_fetch, effect="read_only", timeout_s=cfg.timeout_s + 5)


async def _system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """The verifying TLS context every hop shares (made once: loading CAs takes a while)."""
    return httpx.create_ssl_context()


class _Hop:
    """One request of a fetch: what it asks for, and why it may not."""

    def __init__(self, url: httpx.URL, came_from: httpx.URL | None) -> None:
        self.url = url
        self.came_from = came_from
        if url.scheme not in ("http", "https"):
            what = f"{url.scheme}: URLs" if url.scheme else "URLs without one"
            raise self.refused(f"only http and https URLs are fetched, not {what}")
        if url.userinfo:
            raise self.refused("the URL has a user name or password in it")
        self.written = url.raw_host.decode("ascii")
        if not self.written:
            raise self.refused("the URL has no host")
        try:
            self.ip = numeric_host(self.written)
        except ValueError as exc:
            raise self.refused(str(exc)) from None
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.host = self.written.lower().rstrip(".") if self.ip is None else str(self.ip)
        self.name = self.written.rstrip(".") if self.ip is None \
            else str(self.ip) if isinstance(self.ip, IPv4Address) else f"[{self.ip}]"
        """What ``Host`` and the TLS server name say: the URL's own name, or the address."""

    def refused(self, why: str) -> FetchRefused:
        if self.came_from is not None:
            why += f"; {self.came_from} redirected to {self.url}"
        return FetchRefused(f"refused: {why}")

    def bad_address(self, ip: IPAddress, problem: str) -> FetchRefused:
        why = f"{ip} is {problem}"
        if self.ip is None:
            why += f" ({self.written} resolves to it)"
        elif isinstance(self.ip, IPv4Address) and self.written != str(ip):
            why += f" ({self.written} is another way to write it)"
        return self.refused(why)

    def request(self, ip: IPAddress) -> httpx.Request:
        """The GET that goes to ``ip`` itself, for the hop's name."""
        host_header = self.name if self.url.port is None else f"{self.name}:{self.url.port}"
        extensions: dict[str, Any] = {}
        if self.url.scheme == "https" and self.ip is None:
            extensions["sni_hostname"] = self.name  # the certificate is checked for the name
        return httpx.Request("GET", self.url.copy_with(host=str(ip), fragment=None),
                             headers={**_HEADERS, "host": host_header}, extensions=extensions)


class _Fetcher:
    def __init__(self, cfg: HttpFetchConfig, resolver: Resolver,
                 transport: httpx.AsyncBaseTransport | None) -> None:
        self.cfg = cfg
        self.resolver = resolver
        self.transport = transport

    async def http_fetch(self, url: str) -> dict[str, Any]:
        """GET an http(s) URL: its status, content type, title and readable text.

        HTML comes back as plain text. Local and private network addresses are refused.
        """
        try:
            start = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise FetchRefused(f"refused: {url!r} is not a valid URL ({exc})") from None
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                return await self._fetch(start)
        except TimeoutError:
            raise FetchError(f"{url} gave no complete answer within "
                             f"{self.cfg.timeout_s:g} s") from None

    async def _fetch(self, url: httpx.URL) -> dict[str, Any]:
        came_from: httpx.URL | None = None
        for _ in range(self.cfg.max_redirects + 1):
            hop = _Hop(url, came_from)
            async with self._open(hop) as response:
                location = response.headers.get("location")
                if response.status_code not in _REDIRECTS or not location:
                    return await self._read(url, response)
            try:
                came_from, url = url, url.join(location)
            except httpx.InvalidURL as exc:
                raise FetchError(f"{url} redirected to an invalid URL {location!r}") from exc
        raise FetchError(f"stopped after {self.cfg.max_redirects} redirects "
                         f"([tools.http_fetch] max_redirects); the next was {url}")

    async def _addresses(self, hop: _Hop) -> list[IPAddress]:
        """Every address of the hop's host, each one checked."""
        if hop.ip is not None:
            found: list[IPAddress] = [hop.ip]
        else:
            try:
                found = [ip_address(a) for a in await self.resolver(hop.host, hop.port)]
            except OSError as exc:
                raise FetchError(f"cannot resolve {hop.host}: {exc}") from exc
            if not found:
                raise FetchError(f"{hop.host} resolves to no address")
        for ip in found:
            problem = address_problem(ip)
            if problem is not None and (not self.cfg.allow_private or is_metadata(ip)):
                raise hop.bad_address(ip, problem)
        return found

    @asynccontextmanager
    async def _open(self, hop: _Hop) -> AsyncIterator[httpx.Response]:
        """The hop's response, its body not yet read: the first address that answers."""
        problem = host_problem(hop.host, self.cfg.allow_hosts, self.cfg.deny_hosts)
        if problem is not None:
            raise hop.refused(problem)
        addresses = await self._addresses(hop)
        async with AsyncExitStack() as stack:
            transport = self.transport
            if transport is None:
                transport = httpx.AsyncHTTPTransport(verify=_tls(), retries=0)
                stack.push_async_callback(transport.aclose)
            try:
                response = await self._connect(transport, hop, addresses)
                stack.push_async_callback(response.aclose)
                yield response
            except httpx.HTTPError as exc:
                raise FetchError(f"cannot fetch {hop.url}: {type(exc).__name__}: {exc}") \
                    from exc

    async def _connect(self, transport: httpx.AsyncBaseTransport, hop: _Hop,
                       addresses: list[IPAddress]) -> httpx.Response:
        for ip in addresses[:-1]:
            try:
                return await self._send(transport, hop.request(ip))
            except httpx.ConnectError:
                continue  # as a browser would: the next address (an IPv6 one may be unroutable)
        return await self._send(transport, hop.request(addresses[-1]))

    @staticmethod
    async def _send(transport: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
        response = await transport.handle_async_request(request)
        response.request = request
        return response

    async def _read(self, url: httpx.URL, response: httpx.Response) -> dict[str, Any]:
        media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        result: dict[str, Any] = {"url": str(url), "status": response.status_code,
                                  "content_type": media, "title": None, "text": "",
                                  "truncated": False, "note": None}
        if media and not _is_text(media):
            result["note"] = f"{media} is not text: the body was not read"
            return result
        body, cut = await _read_capped(response, self.cfg.max_bytes)
        if not media and b"\0" in body[:1024]:
            result["note"] = "no content type and the body looks binary: not shown"
            return result
        text = _decode(body, response.charset_encoding, html=media in _HTML_TYPES)
        if media in _HTML_TYPES:
            # Parsing a large page takes a while: keep the event loop free meanwhile.
            result["title"], text = await asyncio.to_thread(html_to_text, text)
        notes = []
        if cut:
            notes.append(f"the body was cut at {self.cfg.max_bytes} bytes "
                         f"([tools.http_fetch] max_bytes)")
        if len(text) > self.cfg.max_chars:
            text = text[:self.cfg.max_chars]
            notes.append(f"the text was cut at {self.cfg.max_chars} characters "
                         f"([tools.http_fetch] max_chars)")
        result.update(text=text, truncated=bool(notes), note="; ".join(notes) or None)
        return result


def _is_text(media: str) -> bool:
    return media.startswith("text/") or media.endswith(("+json", "+xml")) or media in _TEXT_TYPES


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of the (decompressed) body, and whether there was more."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


def _decode(body: bytes, charset: str | None, *, html: bool) -> str:
    """The body as text: a byte-order mark wins, then the header's charset, then (for HTML)
    the page's own ``<meta charset>``, then UTF-8; undecodable bytes become U+FFFD."""
    for bom, marked in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                        (codecs.BOM_UTF16_BE, "utf-16-be")):
        if body.startswith(bom):
            return body[len(bom):].decode(marked, errors="replace")
    declared = EncodingDetector.find_declared_encoding(body, is_html=True) if html else None
    if declared and declared.lower().startswith("utf-16"):
        declared = "utf-8"  # an ASCII-compatible page cannot mean it (the HTML standard's rule)
    for encoding in (charset, declared):
        if encoding:
            try:
                return body.decode(encoding, errors="replace")
            except LookupError:
                continue  # an unknown charset name
    return body.decode("utf-8", errors="replace")
