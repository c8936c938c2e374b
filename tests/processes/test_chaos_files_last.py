"""The chaos soak's last files (chaos/files.py ``draw_last_files``): a message with one file
more than ``[files] max_per_message``, and a Discord download held half-way while its
downloader is killed (the fake CDN's ``hold``, chaos/holds.py); without running a soak."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from chaos.files import (
    FILES,
    FILES_TOML,
    MAX_PER_MESSAGE,
    OVER,
    beyond,
    marker,
    refuses_message,
)
from chaos.files_checks import check_files
from chaos.holds import Holds
from chaos.plan import Op, make_plan
from chaos.sent import Sent
from runtime.engine.files import Files
from runtime.errors import FileRefused
from runtime.model.config import FilesConfig
from tests.fakes.discord import GENERAL_ID, HUMAN_ID, FakeDiscord
from tests.processes.test_chaos_quick import _discord_seen

COUNTED = ["build.log", "chart.png", "data.csv", "extra.txt"]
TOO_MANY = "I could not read extra.txt: at most 3 files are read from one message ([files] " \
           "max_per_message)."


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_one_file_too_many_and_discords_holds_come_from_streams_of_their_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan(7, 300, "postgres", 3)
    monkeypatch.setattr("chaos.plan.draw_last_files", lambda seed, plan: None)
    before = make_plan(7, 300, "postgres", 3)
    for op, was in zip(plan.ops, before.ops, strict=True):
        if beyond(op):  # files where there were none, the last extra.txt; nothing to decide
            assert not was.files and op.files[-1:] == [*OVER], op
            assert len(op.files) == MAX_PER_MESSAGE + 1 and set(op.files[:-1]) <= set(FILES)
            assert op.decide is None and op.cancel_after_s is None, op
            assert not any("deploy" in turn for turn in op.steps), op
            assert dataclasses.replace(op, files=[], via="") == was
        elif op != was:  # else only Discord's held downloads
            assert op.route == "discord" and op.via == "hold" and op.files, op
            assert dataclasses.replace(op, via=was.via) == was
    over = [o for o in plan.ops if beyond(o)]
    assert {o.route for o in over} == {"slack", "discord", "http"}
    assert {o.via for o in over if o.route == "http"} == {"multipart", "json", "cli"}
    assert any(o.route == "discord" and o.via == "hold" for o in plan.ops)


@pytest.mark.parametrize(("seconds", "store", "replicas"), [
    (60, "postgres", 3), (60, "sqlite", 1), (75, "postgres", 3), (75, "sqlite", 1)])
def test_the_ci_pass_and_a_minute_hold_each(seconds: int, store: str, replicas: int) -> None:
    """CI runs seed 52 for about 75 s: each pass has a message with one file too many and a
    held Discord download (a minute's pass too)."""
    plan = make_plan(52, seconds, store, replicas)
    assert any(beyond(o) for o in plan.ops)
    assert any(o.route == "discord" and o.via == "hold" for o in plan.ops)


def test_maiden_reads_at_most_max_per_message_under_the_soaks_limits() -> None:
    limits = FilesConfig.model_validate(tomllib.loads(FILES_TOML)["files"])
    assert limits.max_per_message == MAX_PER_MESSAGE
    files = Files(None, limits, clock=lambda: 0.0)  # type: ignore[arg-type]
    files.too_many(MAX_PER_MESSAGE)
    with pytest.raises(FileRefused, match=r"\(\[files\] max_per_message\)"):
        files.too_many(len(COUNTED))
    assert refuses_message(Op(at=0, tag="m1", thread="t", person="ana", route="http",
                              replica=0, steps=[], files=COUNTED))


def _discord_count(told: list[str]) -> tuple[Any, dict[str, Sent], Any]:
    """A Discord message with ``COUNTED``, its run completed; the bot's replies to it
    ``told``."""
    people, sent, stored = _discord_seen({}, ["m80000"])
    sent["m80000"].op.files = list(COUNTED)
    asked = {"id": "100", "author": {"id": "7"}, "content": "<@1> [m80000] ana asks"}
    replies = [{"author": {"id": "1"}, "content": line,
                "message_reference": {"message_id": "100"}} for line in told]
    fake = SimpleNamespace(world=people.fake.world, messages=lambda c: [asked, *replies])
    return fake, sent, stored


def _found(tmp_path: Path, told: list[str], shown: list[str], blobs: list[str]) -> list[str]:
    """Invariant 7 on ``_discord_count(told)``, the model shown ``shown``, the store
    holding ``blobs``."""
    fake, sent, stored = _discord_count(told)
    log = tmp_path / "model.jsonl"
    log.write_text(json.dumps({"tag": "m80000", "turn": 0, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "[m80000] ana asks"}] + [
            {"type": "text", "text": marker(name)} for name in shown]}]}) + "\n")
    plan = make_plan(1, 10, "sqlite", 1)
    return [v.what for v in check_files(plan, sent, stored, blobs, log, None, fake)]


def test_in_discord_the_first_files_are_read_and_the_one_beyond_only_named(
        tmp_path: Path) -> None:
    first = COUNTED[:MAX_PER_MESSAGE]
    read = [_digest(FILES[name]) for name in first]
    assert _found(tmp_path, [TOO_MANY], first, read) == []
    over = _digest(OVER["extra.txt"])
    assert _found(tmp_path, [TOO_MANY], first, [*read, over]) == [
        "m80000 (discord, extra.txt): the file it was not to read is in the store"]
    assert _found(tmp_path, [TOO_MANY], COUNTED, read) == [
        "m80000 (discord, extra.txt): the model was shown the file it was not to read"]
    assert _found(tmp_path, [TOO_MANY], first[1:], read[1:]) == [
        "m80000: the model was never shown its file build.log",
        "m80000: its file build.log is not in the store"]
    for told in ([], [TOO_MANY, TOO_MANY], ["I could not read extra.txt: it is 80 KB."]):
        found = _found(tmp_path, told, first, read)
        assert len(found) == 1 and found[0].startswith(
            "m80000 (discord, extra.txt): its run completed (started); its place was told"), \
            (told, found)


@pytest.mark.parametrize(("via", "turned", "clean"), [
    ("json", '422 {"detail": "4 files: at most 3 are read from one message ([files] '
             'max_per_message)"}', True),
    ("multipart", '422 {"detail": "4 files: at most 3 are read from one message ([files] '
                  'max_per_message)"}', True),
    ("multipart", '400 {"detail": "the multipart body cannot be read: Too many files."}',
     False),
    ("cli", "maiden: --file given 4 times: at most 3 are read from one message ([files] "
            "max_per_message)", True),
    ("json", '413 {"detail": "the request body is larger than …"}', False),
])
def test_over_http_one_file_too_many_is_turned_down_as_the_limit(
        via: str, turned: str, clean: bool) -> None:
    op = Op(at=0, tag="m00001", thread="chaos/1/t00", person="ana", route="http",
            replica=0, steps=[], files=list(COUNTED), via=via)
    sent = {op.tag: Sent(op, key="k", thread=op.thread, turned_down=turned)}
    _, _, stored = _discord_seen({}, [])
    plan = make_plan(1, 10, "sqlite", 1)
    found = [v.what for v in check_files(plan, sent, stored, [], None, None, None)]
    assert found == ([] if clean else [
        f"m00001 (http, {via}, extra.txt): turned down, but not 422 naming the limit: "
        f"{turned[:200]!r}"])
    stored.runs.append({"run_id": "r1", "text": op.text, "state": "completed",
                        "thread_id": op.thread})  # a run, and its files stored: no good
    found = [v.what for v in check_files(
        plan, sent, stored, [_digest(FILES["build.log"])], None, None, None)]
    assert f"m00001 (http, {via}, extra.txt): a message with a file refused made run r1 " \
           "(completed)" in found


_DOWNLOADER = """
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as got:
    print(got.read(int(sys.argv[2])).hex(), flush=True)
    got.read()
"""


@pytest.mark.timeout(60)
async def test_a_discord_download_held_half_way_has_its_downloader_killed() -> None:
    data = FILES["chart.png"]
    async with FakeDiscord() as fake:
        d = fake.post_as_user(GENERAL_ID, HUMAN_ID, "a chart", files=[
            ("chart.png", data, "image/png")])
        attachment, cdn = d["attachments"][0], fake.cdn
        held = cdn.hold(attachment["id"])
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _DOWNLOADER, attachment["url"], str(len(data) // 2),
            stdout=subprocess.PIPE)
        assert proc.stdout is not None
        got = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert bytes.fromhex(got.decode()) == data[:len(data) // 2]  # the half, then nothing
        killed: list[str] = []

        def kill(replica: Any, why: str) -> None:
            killed.append(f"{replica.name}: {why}")
            replica.proc.kill()

        other = await asyncio.create_subprocess_exec(sys.executable, "-c", "input()",
                                                     stdin=subprocess.PIPE)
        # r1, the downloader, is starting: it downloads before it says it is ready
        replicas = [SimpleNamespace(name="r0", up=True, proc=other),
                    SimpleNamespace(name="r1", up=False, proc=proc)]
        asyncio.get_running_loop().call_later(0.5, setattr, replicas[1], "up", True)
        holds = Holds(replicas, kill)  # type: ignore[arg-type]
        await holds.kill_holder("m80001", held, lambda: cdn.held_from.get(attachment["id"]))
        assert holds.outcomes == {"m80001": "held, r1 killed"}
        assert killed == ["r1: half-way through downloading m80001's file"]
        assert await proc.wait() < 0  # killed while it waited for the rest
        other.kill()
        await other.wait()
        async with httpx.AsyncClient() as http:  # the next download is the whole file
            assert (await http.get(attachment["url"])).content == data
