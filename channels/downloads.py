"""Downloading a file a platform announced (``FileFetcher`` for Slack and Discord): only
from the platform's own file hosts, each origin matched exactly before any request, a
redirect's too (``origins.py``: its token goes nowhere else), streamed and cut off at the
size limit, and never a web page taken for the file: a sign-in page served, or a redirect
to one, instead of the bytes is refused with the reason. A platform out of reach (no
connection, a timeout, a 5xx or a 429) is ``FileUnreachable``: the runtime tries again
later."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import httpx

from runtime import FileRefused, FileSource, FileUnreachable, human_size, looks_like_html

from .origins import allowed_file_url, origin_of, shown_origin

__all__ = ["Downloader"]

_REDIRECTS = 3


class Downloader:
    """Fetches ``FileSource`` URLs on ``origins`` (``https://files.slack.com``: scheme, host
    and port exact) with ``headers`` (a bearer token)."""

    def __init__(self, platform: str, origins: Collection[str], *, no_access: str,
                 headers: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None, timeout_s: float = 60.0) -> None:
        self.platform = platform
        self.origins = tuple(origins)
        self.no_access = no_access
        """What a sign-in page instead of the file means, and what to do about it."""
        self._headers = dict(headers or {})
        self._own = client is None
        # Redirects are followed by hand below, each hop checked before it is requested.
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout_s),
                                                   follow_redirects=False)

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes:
        if not allowed_file_url(source.url, self.origins):
            raise FileRefused(source.name, self._elsewhere(source.url))
        url = httpx.URL(source.url)
        for _ in range(_REDIRECTS + 1):
            try:
                async with self._client.stream("GET", url, headers=self._headers,
                                               follow_redirects=False) as response:
                    if response.is_redirect:
                        url = url.join(response.headers.get("location", ""))
                        if not allowed_file_url(str(url), self.origins):  # a sign-in page
                            raise FileRefused(source.name, self.no_access)
                        continue
                    return await self._body(source, response, max_bytes)
            except httpx.TransportError as exc:  # no connection, a timeout, cut off
                raise FileUnreachable(source.name, f"{self.platform} could not be reached "
                                                   f"({type(exc).__name__})") from exc
            except httpx.HTTPError as exc:
                raise FileRefused(source.name, f"it could not be downloaded from "
                                               f"{self.platform} ({type(exc).__name__})") from exc
        raise FileRefused(source.name, f"{self.platform} redirected it too often")

    def _elsewhere(self, url: str) -> str:
        found = origin_of(url)
        where = "not an http(s) address" if found is None else shown_origin(found)
        hosts = "host" if len(self.origins) == 1 else "hosts"
        return (f"its address ({where}) is not on {self.platform}'s file {hosts} "
                f"({', '.join(self.origins)}), so it was not fetched")

    async def _body(self, source: FileSource, response: httpx.Response, max_bytes: int
                    ) -> bytes:
        if response.status_code in (401, 403):
            raise FileRefused(source.name, self.no_access)
        if response.status_code in (404, 410):
            raise FileRefused(source.name, f"{self.platform} no longer has it (the link may "
                                           "have expired, or the file was deleted)")
        if response.status_code == 429 or response.status_code >= 500:
            raise FileUnreachable(source.name, f"{self.platform} answered "
                                               f"{response.status_code} to its download",
                                  _seconds(response.headers.get("retry-after")))
        if response.status_code != 200:
            raise FileRefused(source.name, f"{self.platform} answered "
                                           f"{response.status_code} to its download")
        wants_html = source.media_type.startswith("text/html") or source.name.lower().endswith(
            (".html", ".htm"))
        served = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if served == "text/html" and not wants_html:
            raise FileRefused(source.name, self.no_access)
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise _too_big(source, int(declared), max_bytes)
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > max_bytes:
                raise _too_big(source, len(data), max_bytes, more=True)
        if not wants_html and looks_like_html(bytes(data[:512])):
            raise FileRefused(source.name, self.no_access)
        return bytes(data)


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (an HTTP date is not worth parsing here: None)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _too_big(source: FileSource, size: int, limit: int, *, more: bool = False) -> FileRefused:
    said = f"more than {human_size(limit)}" if more else human_size(size)
    return FileRefused(source.name, f"it is {said}; at most {human_size(limit)} are read "
                                    "([files] max_bytes)", "size")
