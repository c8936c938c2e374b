"""``GET /v1/threads/{id}/export`` and ``DELETE /v1/threads/{id}`` through the real server:
who may export and who may delete (a caller exports only what it may see; only ``operate``
deletes), a run in progress cancelled first, idempotence, hostile ids, and a thread begun
anew after its erasure being its new owner's only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from runtime import RunState, ToolCallStarted
from tests.fakes.tools import until_cut_off
from tests.http_helpers import echo_runtime, served, thread_url, tokens

ANA = {"Authorization": "Bearer tok-ana-operator"}   # every right
BOB = {"Authorization": "Bearer tok-bob-talker"}     # talk
CAROL = {"Authorization": "Bearer tok-carol-talker"}  # talk
PEOPLE = tokens(("ana", "tok-ana-operator"), ("bob", "tok-bob-talker", ["talk"]),
                ("carol", "tok-carol-talker", ["talk"]))
WAIT_S = 10.0


def lines_of(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


async def test_a_caller_exports_what_it_sees_and_only_an_operator_deletes(
        tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=PEOPLE) as (api, _):
        sent = await api.post(thread_url("bob/notes", "/messages"),
                              json={"text": "my token is tok-ana-operator"}, headers=BOB)
        assert sent.status_code == 200, sent.text

        exported = await api.get(thread_url("bob/notes", "/export"), headers=BOB)
        assert exported.status_code == 200, exported.text
        assert exported.headers["content-type"] == "application/x-ndjson"
        assert "attachment" in exported.headers["content-disposition"]
        lines = lines_of(exported.text)
        assert [line["type"] for line in lines] == ["thread", "entry", "entry", "run"]
        assert lines[1]["entry"]["text"] == "my token is [redacted]"  # type: ignore[index]
        assert "tok-ana-operator" not in exported.text

        for other, status in ((CAROL, 404), ({"Authorization": ""}, 401)):
            refused = await api.get(thread_url("bob/notes", "/export"), headers=other)
            assert refused.status_code == status  # another's thread is as if there were none
        assert (await api.get(thread_url("nobody", "/export"), headers=ANA)).status_code == 404

        forbidden = await api.delete(thread_url("bob/notes"), headers=BOB)
        assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
        deleted = await api.delete(thread_url("bob/notes"), headers=ANA)
        assert deleted.status_code == 200, deleted.text
        assert deleted.json() == {"thread_id": "bob/notes", "existed": True, "entries": 2,
                                  "runs": 1, "deliveries": 0, "votes": 0, "notes": 0,
                                  "files": 0, "memories": 0}
        again = await api.delete(thread_url("bob/notes"), headers=ANA)
        assert again.status_code == 200 and again.json()["existed"] is False
        for gone in (thread_url("bob/notes"), thread_url("bob/notes", "/export")):
            assert (await api.get(gone, headers=BOB)).status_code == 404
        assert await rt.records.runs(thread_id="bob/notes") == []


async def test_a_thread_begun_anew_by_another_is_theirs_alone(tmp_path: Path) -> None:
    """What the server knew of the erased thread's owner (it keeps owners) does not carry
    over to a thread of the same id that another caller begins."""
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=PEOPLE) as (api, _):
        url = thread_url("shared-name")
        await api.post(thread_url("shared-name", "/messages"), json={"text": "bob's"},
                       headers=BOB)
        assert (await api.get(url, headers=BOB)).status_code == 200
        assert (await api.get(url, headers=CAROL)).status_code == 404
        await rt.delete_thread("shared-name")  # as `maiden threads delete` would, elsewhere
        made = await api.post(thread_url("shared-name", "/messages"),
                              json={"text": "carol's"}, headers=CAROL)
        assert made.status_code == 200, made.text
        assert (await api.get(url, headers=CAROL)).status_code == 200
        assert (await api.get(url, headers=BOB)).status_code == 404
        assert (await api.get(thread_url("shared-name", "/export"),
                              headers=BOB)).status_code == 404


async def test_a_run_in_progress_is_cancelled_before_the_thread_goes(tmp_path: Path) -> None:
    forever, stopped = until_cut_off()
    async with echo_runtime(tmp_path / "m.db", [forever]) as rt, \
            served(rt, credentials=PEOPLE) as (api, _):
        async with rt.subscribe() as events:
            accepted = await api.post(thread_url("busy", "/messages"),
                                      json={"text": "/tool forever {}", "wait": False},
                                      headers=ANA)
            assert accepted.status_code == 202, accepted.text
            while not isinstance(await asyncio.wait_for(events.next(), WAIT_S),
                                 ToolCallStarted):
                pass
        deleted = await api.delete(thread_url("busy"), headers=ANA)
        assert deleted.status_code == 200 and deleted.json()["runs"] == 1
        assert stopped.is_set()
        assert await rt.records.runs(states=[RunState.RUNNING]) == []
        assert (await api.get(thread_url("busy"), headers=ANA)).status_code == 404


async def test_hostile_ids_name_their_own_thread(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        for thread_id in ("a", "a/export", "../x", ".."):
            await api.post(thread_url(thread_id, "/messages"), json={"text": thread_id})
        # The thread "a/export" is read as a thread, and exported at its own /export.
        read = await api.get(thread_url("a/export"))
        assert read.status_code == 200 and read.json()["thread_id"] == "a/export"
        exported = await api.get(thread_url("a/export", "/export"))
        assert lines_of(exported.text)[0]["thread_id"] == "a/export"
        assert lines_of((await api.get(thread_url("a", "/export"))).text)[0]["thread_id"] \
            == "a"
        for thread_id in ("../x", "a/export"):
            assert (await api.delete(thread_url(thread_id))).json()["existed"] is True
        left = sorted(t.id for t in await rt.records.threads())
        assert left == ["..", "a"]
        refused = await api.delete(thread_url("a\x1bb"))
        assert refused.status_code == 422
        assert sorted(t.id for t in await rt.records.threads()) == left


async def test_a_foreign_origin_may_not_delete(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (api, _):
        await api.post(thread_url("t", "/messages"), json={"text": "hi"})
        refused = await api.delete(thread_url("t"), headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403 and refused.json()["code"] == "foreign_origin"
        assert await rt.records.runs(thread_id="t") != []
