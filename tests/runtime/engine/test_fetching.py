"""Files whose channel cannot fetch them yet: a queued run waits for the channel's fetcher
(`maiden run` opens its channels after recovery) and goes on once it is registered;
a platform out of reach is tried again with backoff; a channel not configured here
refuses, saying so; a download under way at shutdown is cut off, the run left queued."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime import (
    EchoProvider,
    FileRefused,
    FileSource,
    FileUnreachable,
    Notice,
    Origin,
    RunState,
    Runtime,
    SQLiteStore,
    StateChanged,
    UserMessage,
)
from runtime.engine.fetching import Patience, fetcher_awaited
from runtime.engine.files import Files
from runtime.engine.intake import new_run
from tests.samples import png

CHAT = Origin(channel="chat", target={"room": "r1"}, user="U1")
SHOT = png(64, 48)


def source(via: str = "chat", name: str = "shot.png") -> FileSource:
    return FileSource(via=via, url=f"u/{name}", name=name, media_type="image/png")


class Shelf:
    """A channel's fetcher: ``down`` attempts find the platform out of reach, then each
    download is counted and served; with ``hold``, a download waits until let go."""

    def __init__(self, down: int = 0, hold: bool = False) -> None:
        self.down = down
        self.fetched: list[str] = []
        self.asked = asyncio.Event()
        self.go = asyncio.Event()
        if not hold:
            self.go.set()

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes:
        self.asked.set()
        if self.down:
            self.down -= 1
            raise FileUnreachable(source.name, "the platform could not be reached "
                                               "(ConnectError)")
        await self.go.wait()
        self.fetched.append(source.url)
        return SHOT


QUEUED = new_run("t", "look", CHAT, None, max_chars=100, now=1.0, fetch=(source(),))


@pytest.mark.parametrize(("run", "fetching", "expected", "awaited"), [
    (QUEUED, set(), {"chat"}, "chat"),             # configured, not open yet: wait for it
    (QUEUED, {"chat"}, {"chat"}, None),            # its fetcher is here: go
    (QUEUED, set(), set(), None),                  # not configured: go (and refuse it)
    (QUEUED, set(), {"slack"}, None),              # another channel is configured
    (QUEUED.model_copy(update={"started_at": 2.0}), set(), {"chat"}, None),  # resumed
    (QUEUED.model_copy(update={"state": RunState.RUNNING}), set(), {"chat"}, None),
    (QUEUED.model_copy(update={"fetch": ()}), set(), {"chat"}, None),  # nothing to fetch
    (QUEUED.model_copy(update={"fetch": (source("slack"), source())}), {"slack"}, {"chat"},
     "chat"),                                      # the second file's channel
])
def test_which_runs_wait_for_their_channels_fetcher(
        run: object, fetching: set[str], expected: set[str], awaited: str | None) -> None:
    assert fetcher_awaited(run, fetching, expected) == awaited  # type: ignore[arg-type]


@pytest.mark.parametrize(("attempt", "waited", "asked", "delay"), [
    (0, 0.0, None, 0.5),       # half of the cap, plus the jitter (0 here)
    (1, 0.5, None, 1.0),
    (6, 60.0, None, 30.0),     # the cap: max_s
    (20, 60.0, None, 30.0),
    (0, 0.0, 7.0, 7.0),        # the platform's Retry-After, when longer
    (0, 0.0, 500.0, 60.0),     # ... up to max_s
    (4, 95.0, None, 5.0),      # no further than give_up_s
    (3, 100.0, None, None),    # spent: give up
])
def test_how_long_an_unreachable_platform_is_waited_for(
        attempt: int, waited: float, asked: float | None, delay: float | None) -> None:
    patience = Patience(base_s=1.0, max_s=60.0, give_up_s=100.0, random=lambda: 0.0)
    assert patience.delay(attempt, waited, asked) == delay


async def test_a_runtime_without_the_channel_leaves_a_run_to_one_that_fetches(
        tmp_path: Path) -> None:
    """A run queued with a file, its process gone: the recovery of a runtime built without
    that channel's fetcher (a command that opens no channels) neither waits for it nor
    refuses the file; one built with it (`maiden run`'s) takes the run up as it starts:
    the file fetched once, the answer once."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        async with Runtime(store, EchoProvider(), channels=["chat"]) as before, \
                before.subscribe() as events:
            queued = await before.submit("t", "look", origin=CHAT, fetch=[source()])
            said = await asyncio.wait_for(events.next(), 10)
            assert isinstance(said, StateChanged) and said.run_id == queued.id
            assert said.reason == "waiting for the chat channel to download its files"
            await before.idle()  # the worker left the thread: nothing to wait for
        rt = Runtime(store, EchoProvider(), channels=["chat"])
        try:
            async with asyncio.timeout(10):
                assert await rt.start() == []  # not taken up, not waited for
            left = await rt.records.get_run(queued.id)
            assert left.state is RunState.QUEUED and left.started_at is None
            assert await rt.records.entries("t") == []
        finally:
            await rt.close()
        shelf = Shelf()
        rt = Runtime(store, EchoProvider(), channels=["chat"], fetchers={"chat": shelf})
        try:
            async with asyncio.timeout(10):
                (done,) = await rt.start()
            assert done.state is RunState.COMPLETED
            assert done.reply is not None and "[received shot.png (image/png, 64x48" \
                in done.reply
            assert shelf.fetched == ["u/shot.png"]
            (user,) = [e for e in await rt.records.entries("t") if isinstance(e, UserMessage)]
            assert [f.name for f in user.files] == ["shot.png"]
            assert not [e for e in await rt.records.entries("t") if isinstance(e, Notice)]
        finally:
            await rt.close()


async def test_a_channel_not_configured_here_refuses_with_the_reason(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), channels=["slack"]) as rt:
        run = await rt.submit("t", "look", origin=CHAT, fetch=[source()])
        async with asyncio.timeout(10):
            done = await rt.wait(run.id)
        assert done.state is RunState.COMPLETED
        notice = [e for e in await rt.records.entries("t") if isinstance(e, Notice)]
        assert [n.text for n in notice] == [
            "I could not read shot.png: the chat channel is not running here to download it."]


async def test_a_platform_out_of_reach_is_tried_again_then_given_up(tmp_path: Path) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    patience = Patience(give_up_s=10.0, sleep=sleep, random=lambda: 0.0)
    async with SQLiteStore(tmp_path / "m.db") as store:
        back = Shelf(down=2)
        files = Files(store, clock=lambda: 1.0, patience=patience, fetchers={"chat": back})
        taken = await files.take(QUEUED, None)
        assert [f.name for f in taken.refs] == ["shot.png"] and not taken.refused
        assert slept == [0.5, 1.0] and back.fetched == ["u/shot.png"]

        slept.clear()
        files = Files(store, clock=lambda: 1.0, patience=patience,
                      fetchers={"chat": Shelf(down=100)})
        taken = await files.take(QUEUED, None)
        (refused,) = taken.refused
        assert isinstance(refused, FileRefused) and not taken.refs
        assert slept == [0.5, 1.0, 2.0, 4.0, 2.5]  # 10 seconds, the last one cut short
        assert taken.notice == ("I could not read shot.png: the platform could not be "
                                "reached (ConnectError), tried again for 10 seconds.")


async def test_a_download_under_way_at_shutdown_is_cut_off_and_the_run_left_queued(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store:
        shelf = Shelf(hold=True)  # never lets go
        rt = Runtime(store, EchoProvider(), channels=["chat"], fetchers={"chat": shelf})
        await rt.start()
        run = await rt.submit("t", "look", origin=CHAT, fetch=[source()])
        await asyncio.wait_for(shelf.asked.wait(), 10)
        async with asyncio.timeout(10):
            await rt.close(grace_s=3600)  # not waited for: cut off at once
        left = await store.get_run(run.id)
        assert left.state is RunState.QUEUED and left.owner is None
        assert await store.blobs() == [] and await store.load_entries("t") == []


async def test_nothing_is_downloaded_for_a_thread_another_process_drives(
        tmp_path: Path) -> None:
    """chaos seed 10404: while another replica held a thread, this one downloaded the files
    of the thread's queued run each time it looked (about once a second, for minutes) and
    dropped them. Its files are downloaded once, by whoever drives the run."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        elsewhere = "other/1@another-machine"
        assert await store.take_lease("thread:t", elsewhere, 600.0) is None
        shelf = Shelf()
        rt = Runtime(store, EchoProvider(), channels=["chat"], fetchers={"chat": shelf})
        await rt.start()
        try:
            run = await rt.submit("t", "look", origin=CHAT, fetch=[source()])
            for _ in range(3):  # looked at again and again, as the upkeep does
                await rt._upkeep.adopt_orphans()
                await rt.idle()
            assert shelf.fetched == []
            await store.release_leases(elsewhere)
            await rt._upkeep.adopt_orphans()
            async with asyncio.timeout(10):
                done = await rt.wait(run.id)
        finally:
            await rt.close()
    assert done.state is RunState.COMPLETED and shelf.fetched == ["u/shot.png"]
