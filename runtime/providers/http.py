"""The transport the HTTP providers share: POST with retries, SSE decoding, error translation.

A provider turns entries into its vendor's JSON and back; this module only
moves bytes. The ``httpx.AsyncClient`` is injected (or made on first use and
owned), so a test can hand it a ``MockTransport`` or point it at a local server.

Retry rule: 429, 5xx (529 "overloaded" included), a connection error or no
response within ``timeout_s`` is retried with exponential backoff and jitter,
or after the server's ``retry-after-ms`` / ``Retry-After``. Other 4xx are not.
Once a successful response has started streaming, a failure is not retried:
text may already have reached subscribers, so the turn fails (resumably).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import ContextTooLong, ProviderError
from ..retry import Failed, Sleep, doubling, jittered, retrying

__all__ = [
    "HttpTransport",
    "Retry",
    "SSEDecoder",
    "ServerSentEvent",
    "parse_json",
    "parse_retry_after",
]

POOL = httpx.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=5.0)
"""The pool of the client a transport makes: every connection kept for the next turn.
httpx keeps only 20 idle by default, so with more model calls at once (``concurrency =
"thread"``, many threads) each call past the 20th closed its connection as it ended, and
the next turn opened a new one: against a real API, a TCP and TLS handshake per turn.
Idle connections still close after ``keepalive_expiry``."""


def _retryable(status: int | None) -> bool:
    """Whether a failure is tried again: no answer (None), 429, or 5xx."""
    return status is None or status == 429 or status >= 500  # 529 is Anthropic's "overloaded"


def _unnoted(attempt: int, reason: str) -> None:
    """No one told of a retry."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How failed attempts are retried. ``sleep`` and ``random`` are injectable for tests."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_wait_s: float = 120.0
    """A ``Retry-After`` longer than this fails the turn at once instead of waiting."""
    sleep: Sleep = asyncio.sleep
    random: Callable[[], float] = random.random
    noted: Callable[[int, str], None] = _unnoted
    """Told of each retry (its number, from 1, and why): a built provider's is
    ``tracing.note_retry``, an event on the traced model call."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        if retry_after is not None:
            return retry_after
        return jittered(doubling(attempt, self.base_delay_s, self.max_delay_s), self.random)

    def pause(self, failed: Failed[ProviderError]) -> float | None:
        """Seconds to wait before trying ``failed``'s request again; None: it fails now (no
        retries left, an answer not worth another try, or a ``Retry-After`` too long)."""
        error = failed.error
        if failed.tries > self.max_retries or not _retryable(error.status):
            return None
        if error.retry_after is not None and error.retry_after > self.max_wait_s:
            return None
        return self.delay(failed.tries - 1, error.retry_after)

    def told(self, failed: Failed[ProviderError], pause: float) -> None:
        self.noted(failed.tries, str(failed.error))


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``Retry-After``
    (seconds or an HTTP date); None when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str = "message"
    data: str = ""


@dataclass(slots=True)
class SSEDecoder:
    """The text/event-stream grammar, one line at a time (a blank line dispatches)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            sse = ServerSentEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return sse
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # "id" and "retry" do not matter for a one-shot POST


class HttpTransport:
    """POSTs JSON to one endpoint of one provider, with retries and readable errors."""

    def __init__(
        self,
        name: str,
        url: str,
        headers: Mapping[str, str],
        *,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 60.0,
        retry: Retry | None = None,
        api_key_env: str | None = None,
        has_key: bool = True,
    ) -> None:
        self.name = name
        self.url = url
        self.headers = dict(headers)
        self.timeout_s = timeout_s
        self.retry = retry or Retry()
        self.api_key_env = api_key_env
        self.has_key = has_key
        self._client = client
        self._owns_client = client is None

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    @asynccontextmanager
    async def post(self, body: Any, *, stream: bool) -> AsyncIterator[httpx.Response]:
        """The successful response, retried as needed; streamed bodies are closed on exit
        (also on cancellation, which closes the connection)."""
        response = await self._send(body, stream=stream)
        try:
            yield response
        finally:
            await response.aclose()

    async def _send(self, body: Any, *, stream: bool) -> httpx.Response:
        if self._client is None:
            self._client = httpx.AsyncClient(limits=POOL)
        content = json.dumps(body, ensure_ascii=False).encode()
        headers = {**self.headers, "content-type": "application/json"}
        if stream:
            headers["accept"] = "text/event-stream"
        retry = self.retry
        return await retrying(lambda: self._attempt(content, headers, stream=stream),
                              on=ProviderError, pause=retry.pause, told=retry.told,
                              sleep=retry.sleep)

    async def _attempt(self, content: bytes, headers: dict[str, str], *,
                       stream: bool) -> httpx.Response:
        """One POST: the successful response, or the ``ProviderError`` saying why not."""
        assert self._client is not None
        request = self._client.build_request(
            "POST", self.url, content=content, headers=headers,
            timeout=httpx.Timeout(self.timeout_s))
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.send(request, stream=True)
                if not stream or not response.is_success:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
        except TimeoutError:
            error = ProviderError(f"{self.name}: no response from {self.url} within "
                                  f"{self.timeout_s:g} s (provider.timeout_s)")
        except httpx.HTTPError as exc:
            error = ProviderError(f"{self.name}: cannot reach {self.url}: "
                                  f"{type(exc).__name__}: {exc}".rstrip(": "))
        else:
            if response.is_success:
                return response
            error = self._http_error(response, self.retry.max_retries + 1)
        raise error

    def _http_error(self, response: httpx.Response, attempts: int) -> ProviderError:
        status = response.status_code
        detail = _error_detail(response)
        env = f"${self.api_key_env}" if self.api_key_env else "the variable provider.api_key_env"
        if status == 401:
            why = "no API key was sent" if not self.has_key else "the API key was rejected"
            message = (f"{why} (HTTP 401): the key is missing or wrong; set {env} "
                       f"(named by provider.api_key_env)")
        elif status == 403:
            message = f"the API key is not allowed to do this (HTTP 403, {env})"
        elif status == 404:
            message = "not found (HTTP 404): check provider.model and provider.base_url"
        elif status == 413:
            message = ("the request is too large (HTTP 413): lower agent.max_context_tokens")
        elif status == 429:
            message = f"rate limited (HTTP 429) after {attempts} attempt(s)"
        elif status == 529:
            message = f"overloaded (HTTP 529) after {attempts} attempt(s)"
        elif status >= 500:
            message = f"server error (HTTP {status}) after {attempts} attempt(s)"
        else:
            message = f"rejected the request (HTTP {status})"
        if detail:
            message += f": {detail}"
        kind = ContextTooLong if status in (400, 413) and _too_long(detail) else ProviderError
        return kind(f"{self.name}: {message}", status=status,
                    retry_after=parse_retry_after(response.headers))

    async def drain(self, events: AsyncIterator[ServerSentEvent]) -> None:
        """Read a finished stream to its end (the server's last bytes after the end marker),
        so that its connection goes back to the pool for the next turn instead of being
        thrown away; a stream that does not end within a second is closed as it is."""
        with contextlib.suppress(TimeoutError, ProviderError):
            async with asyncio.timeout(1.0):
                async for _ in events:
                    pass

    async def events(self, response: httpx.Response) -> AsyncIterator[ServerSentEvent]:
        """The server-sent events of a streamed response, as they arrive."""
        decoder = SSEDecoder()
        try:
            async for line in response.aiter_lines():
                event = decoder.feed(line)
                if event is not None:
                    yield event
        except httpx.TimeoutException as exc:
            raise ProviderError(f"{self.name}: the stream stalled: nothing arrived for "
                                f"{self.timeout_s:g} s (provider.timeout_s)") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{self.name}: the stream broke off mid-answer: "
                                f"{type(exc).__name__}: {exc}") from exc
        # A final event without its blank line is incomplete: dropped, as the SSE spec says.


_TOO_LONG = ("context_length_exceeded", "prompt is too long", "maximum context length",
             "context window", "too many tokens", "context length")


def _too_long(detail: str) -> bool:
    """Whether an error says the prompt did not fit (OpenAI's code, Anthropic's words, and
    what compatible servers say)."""
    lowered = detail.lower()
    return any(words in lowered for words in _TOO_LONG)


def _error_detail(response: httpx.Response) -> str:
    """The server's own words: ``error.message`` of an Anthropic/OpenAI error body, or text."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:300]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            kind = err.get("type") or err.get("code")
            message = err.get("message") or ""
            return f"{kind}: {message}" if kind and message else str(message or kind or "")
        if isinstance(err, str):
            return err[:300]
    return json.dumps(body)[:300]


def parse_json(name: str, data: str | bytes, what: str) -> Any:
    """``json.loads`` that fails as a ProviderError naming what was being read."""
    try:
        return json.loads(data)
    except ValueError as exc:
        snippet = data[:120] if isinstance(data, str) else data[:120].decode(errors="replace")
        raise ProviderError(f"{name}: malformed {what}: {exc} (got {snippet!r})") from exc
