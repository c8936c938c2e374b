"""How `maiden run` composes channels: a channel's replies have somewhere to go from the
moment it starts opening (a message it takes while it, or a channel after it, still
opens is answered at once, not at the outbox's next sweep)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Self

import httpx
import pytest

from bot import load_config
from bot.app import open_app, open_channels
from bot.wiring import Prepared, make_channels
from channels.http import HttpChannel
from runtime import (
    Deliverer,
    Delivery,
    FileFetcher,
    Origin,
    Records,
    ReplyDelivery,
    Runtime,
)
from tests.fakes.slack import BOT_USER, FakeSlack, signed_event

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """A deliverer that keeps what it is handed."""

    max_chars: int | None = None

    def __init__(self) -> None:
        self.sent: list[Delivery] = []
        self.posted = asyncio.Event()

    async def send(self, delivery: Delivery) -> str:
        self.sent.append(delivery)
        self.posted.set()
        return f"m{len(self.sent)}"

    async def reconcile(self, delivery: Delivery) -> str | None:
        return None


class AnsweredWhileOpening:
    """A channel that takes a message while it opens, and opens only once it is answered
    (through ``recorder``, its deliverer, which the runtime was built with)."""

    name = "probe"

    def __init__(self, runtime: Runtime, recorder: Recorder) -> None:
        self.runtime = runtime
        self.recorder = recorder
        self.deliverer: Deliverer | None = recorder
        self.fetcher: FileFetcher | None = None

    async def __aenter__(self) -> Self:
        await self.runtime.submit("probe:1", "hi while opening", origin=Origin(
            channel=self.name, target={"channel": "c1"}))
        try:
            async with asyncio.timeout(30):
                await self.recorder.posted.wait()
        except TimeoutError:
            raise AssertionError("the reply waited in the outbox while the channel opened") \
                from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def banner(self) -> str:
        return "probe"

    def status(self) -> str:
        return "open"

    def stop_intake(self) -> None:
        pass

    async def closed(self) -> None:
        await asyncio.Event().wait()


async def test_a_reply_due_while_its_channel_opens_goes_out_at_once(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text((ROOT / "agent.toml").read_text()
                                         + "\n[http]\nenabled = false\n")
    loaded = load_config(tmp_path / "agent.toml")
    recorder = Recorder()

    def probe(records: Records) -> Prepared:
        return Prepared(AnsweredWhileOpening.name, recorder, None,
                        lambda runtime, *_: AnsweredWhileOpening(runtime, recorder))

    async with open_app(loaded, recover=True, serve=True, channels=[probe]) as app, \
            AsyncExitStack() as stack:
        (channel,) = [p.make(app.runtime, None, None) for p in app.channels]
        assert isinstance(channel, AnsweredWhileOpening)
        await open_channels(stack, app.runtime, [channel])
    (reply,) = channel.recorder.sent
    assert isinstance(reply, ReplyDelivery) and reply.target == {"channel": "c1"}
    assert reply.text == "echo: hi while opening"


async def test_a_start_begun_again_takes_slacks_events_with_its_own_runtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`maiden run` begun again from the top after a store error (``bot.opening.
    starting_again``) makes its channels anew over the new runtime: the Events API's
    endpoint (``mode = "http"``) is the new Slack channel's, not the first start's, whose
    runtime is shut down (every event, click and command was answered 500 for the life of
    the process: chaos/README.md, finding 17)."""
    async with FakeSlack() as fake:
        monkeypatch.setenv("SLACK_BOT_TOKEN", fake.bot_token)
        monkeypatch.setenv("SLACK_SIGNING_SECRET", fake.signing_secret)
        (tmp_path / "agent.toml").write_text(
            (ROOT / "agent.toml").read_text() + "\n[http]\nport = 0\n\n[channels.slack]\n"
            f'mode = "http"\napi_url = "{fake.api_url}"\nopen = true\n')
        loaded = load_config(tmp_path / "agent.toml")
        factories = make_channels(loaded)
        for start in ("stopped on a store error", "begun again"):
            async with open_app(loaded, recover=True, serve=True, channels=factories) as app, \
                    AsyncExitStack() as stack:
                channels = [made.make(app.runtime, None, None) for made in app.channels]
                await open_channels(stack, app.runtime, channels)
                if start != "begun again":
                    continue
                event = fake.user_event("C0GENERAL1", "U1", f"<@{BOT_USER}> hello",
                                        mention=True)
                body, headers = signed_event(event, fake.signing_secret)
                http = channels[-1]
                assert isinstance(http, HttpChannel)
                async with httpx.AsyncClient(timeout=10) as client:
                    taken = await client.post(f"{http.url}/slack/events", content=body,
                                              headers=headers)
                assert taken.status_code == 200, taken.text
                await app.runtime.idle()
                (run,) = await app.runtime.records.runs()
                assert run.reply == "echo: hello"
