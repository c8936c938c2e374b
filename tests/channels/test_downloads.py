"""A platform's file download at the wire: out of reach (no connection, a 5xx, a 429) is
``FileUnreachable``, tried again by the runtime; a file gone is refused."""

from __future__ import annotations

import httpx
import pytest

from channels.downloads import Downloader
from runtime import FileRefused, FileSource, FileUnreachable

URL = "https://files.slack.com/files-pri/T1-F1/download/data.csv"
SOURCE = FileSource(via="slack", url=URL, name="data.csv", media_type="text/csv")


def downloader(answer: httpx.Response | Exception) -> Downloader:
    def handle(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        return answer

    return Downloader("Slack", ["https://files.slack.com"], no_access="no access",
                      client=httpx.AsyncClient(transport=httpx.MockTransport(handle)))


@pytest.mark.parametrize(("answer", "why", "retry_after"), [
    (httpx.ConnectError("refused"), "Slack could not be reached (ConnectError)", None),
    (httpx.ReadTimeout("slow"), "Slack could not be reached (ReadTimeout)", None),
    (httpx.Response(503), "Slack answered 503 to its download", None),
    (httpx.Response(429, headers={"Retry-After": "7"}), "Slack answered 429 to its download",
     7.0),
])
async def test_a_platform_out_of_reach_is_unreachable_not_refused(
        answer: httpx.Response | Exception, why: str, retry_after: float | None) -> None:
    with pytest.raises(FileUnreachable) as caught:
        await downloader(answer).fetch(SOURCE, 1000)
    assert caught.value.why == why and caught.value.retry_after == retry_after


@pytest.mark.parametrize(("answer", "why"), [
    (httpx.Response(404), "Slack no longer has it (the link may have expired, or the file "
                          "was deleted)"),
    (httpx.Response(400), "Slack answered 400 to its download"),
    (httpx.TooManyRedirects("loop"), "it could not be downloaded from Slack "
                                     "(TooManyRedirects)"),
])
async def test_a_file_the_platform_will_not_give_is_refused(
        answer: httpx.Response | Exception, why: str) -> None:
    with pytest.raises(FileRefused) as caught:
        await downloader(answer).fetch(SOURCE, 1000)
    assert caught.value.why == why


async def test_a_file_is_downloaded() -> None:
    got = await downloader(httpx.Response(200, content=b"a,b\n1,2\n",
                                          headers={"Content-Type": "text/csv"})
                           ).fetch(SOURCE, 1000)
    assert got == b"a,b\n1,2\n"


def recording(answers: dict[str, httpx.Response]) -> tuple[Downloader, list[httpx.Request]]:
    """A downloader with the bot token over a transport that answers by URL and records
    every request."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.get(str(request.url), httpx.Response(200, content=b"secret"))

    return Downloader("Slack", ["https://files.slack.com"], no_access="no access",
                      headers={"Authorization": "Bearer xoxb-1"},
                      client=httpx.AsyncClient(transport=httpx.MockTransport(handle))), seen


@pytest.mark.parametrize(("url", "where"), [
    ("http://127.0.0.1:52501/steal-private", "http://127.0.0.1:52501"),
    ("https://files.slack.com:8443/files-pri/T1-F1/a.csv", "https://files.slack.com:8443"),
    ("https://slack.com/api/conversations.history?channel=C1", "https://slack.com"),
    ("file:///etc/passwd", "not an http(s) address"),
])
async def test_a_url_off_the_file_host_is_refused_before_any_request(url: str, where: str
                                                                      ) -> None:
    fetcher, seen = recording({})
    with pytest.raises(FileRefused) as caught:
        await fetcher.fetch(FileSource(via="slack", url=url, name="a.csv"), 1000)
    assert caught.value.why == (f"its address ({where}) is not on Slack's file host "
                                "(https://files.slack.com), so it was not fetched")
    assert seen == []


async def test_a_redirect_off_the_file_host_is_not_followed() -> None:
    fetcher, seen = recording({URL: httpx.Response(
        302, headers={"Location": "http://127.0.0.1:52501/steal-private"})})
    with pytest.raises(FileRefused) as caught:
        await fetcher.fetch(SOURCE, 1000)
    assert caught.value.why == "no access"
    assert [str(r.url) for r in seen] == [URL]  # the other origin got no request, no token


async def test_a_redirect_on_the_file_host_is_followed_with_the_token() -> None:
    moved = "https://files.slack.com/files-pri/T1-F1/data.csv?origin_team=T1"
    fetcher, seen = recording({URL: httpx.Response(302, headers={"Location": moved}),
                               moved: httpx.Response(200, content=b"a,b\n",
                                                     headers={"Content-Type": "text/csv"})})
    assert await fetcher.fetch(SOURCE, 1000) == b"a,b\n"
    assert [(str(r.url), r.headers["Authorization"]) for r in seen] == [
        (URL, "Bearer xoxb-1"), (moved, "Bearer xoxb-1")]

