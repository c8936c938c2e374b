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

    return Downloader("Slack", {"files.slack.com"}, no_access="no access",
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
