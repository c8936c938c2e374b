"""The console's Export link and Delete button on a thread's page, on the real server: who
is offered what, who may do it (an export only of a thread one may see, a deletion only
with ``operate``, its box ticked and the session's CSRF token), and what the pages say."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote

import httpx

from tests.http_helpers import echo_runtime, served, thread_url, tokens

PEOPLE = tokens(("alice", "tok-alice-operator"), ("bob", "tok-bob-talker", ["talk"]),
                ("carol", "tok-carol-talker", ["talk"]))
THREAD = "bob/notes ../x"


@asynccontextmanager
async def people(tmp_path: Path) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """Bob's thread made over the API, and a browser signed in as each of them."""
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=PEOPLE) as (api, _):
        made = await api.post(thread_url(THREAD, "/messages"),
                              json={"text": "bob's words, tok-alice-operator"},
                              headers={"Authorization": "Bearer tok-bob-talker"})
        assert made.status_code == 200, made.text
        clients = {}
        for name, token in (("alice", "tok-alice-operator"), ("bob", "tok-bob-talker"),
                            ("carol", "tok-carol-talker")):
            client = httpx.AsyncClient(base_url=str(api.base_url), timeout=10.0)
            assert (await client.post("/sign-in", data={"token": token})).status_code == 303
            clients[name] = client
        try:
            yield clients
        finally:
            for client in clients.values():
                await client.aclose()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html[:500]
    return found[1]


def page_of(thread_id: str) -> str:
    return f"/threads/{quote(thread_id, safe='')}"


async def test_an_operator_is_offered_delete_and_everyone_who_sees_it_export(
        tmp_path: Path) -> None:
    async with people(tmp_path) as who:
        export = f"/console/export?thread={quote(THREAD, safe='')}"
        for name in ("alice", "bob"):
            page = await who[name].get(page_of(THREAD))
            assert page.status_code == 200
            assert f'<a id="export" href="{export}" download>Export</a>' in page.text
            offered = 'action="/console/threads/delete"' in page.text
            assert offered is (name == "alice")
        form = (await who["alice"].get(page_of(THREAD))).text
        assert 'name="confirm" value="yes" required' in form
        assert f'<input type="hidden" name="thread" value="{THREAD}">' in form

        got = await who["bob"].get(export)
        assert got.status_code == 200 and got.headers["content-type"] == "application/x-ndjson"
        assert got.headers["content-disposition"].startswith("attachment;")
        lines = [json.loads(line) for line in got.text.splitlines()]
        assert lines[0]["thread_id"] == THREAD and lines[1]["entry"]["text"] == \
            "bob's words, [redacted]"
        assert got.headers["content-security-policy"].startswith("default-src 'self'")
        for missing in (export, "/console/export?thread=nobody", "/console/export"):
            refused = await who["carol"].get(missing)
            assert refused.status_code == 404 and "There is no thread" in refused.text


async def test_delete_needs_operate_the_box_ticked_and_the_form_s_token(
        tmp_path: Path) -> None:
    async with people(tmp_path) as who:
        alice, bob = who["alice"], who["bob"]
        token = csrf_of((await alice.get(page_of(THREAD))).text)
        form = {"csrf": token, "thread": THREAD, "confirm": "yes"}

        mine = csrf_of((await bob.get(page_of(THREAD))).text)
        refused = await bob.post("/console/threads/delete", data={**form, "csrf": mine})
        assert refused.status_code == 403 and "needs the &#39;operate&#39; right" in refused.text
        stale = await alice.post("/console/threads/delete", data={**form, "csrf": "0" * 64})
        assert stale.status_code == 403 and "CSRF" in stale.text
        unticked = await alice.post("/console/threads/delete",
                                    data={"csrf": token, "thread": THREAD})
        assert unticked.status_code == 422 and "Tick the box" in unticked.text
        assert (await bob.get(page_of(THREAD))).status_code == 200  # still there

        deleted = await alice.post("/console/threads/delete", data=form)
        assert deleted.status_code == 200 and "Thread deleted" in deleted.text
        assert "2 entries, 1 run, 0 outbox records" in deleted.text
        for client in (alice, bob):
            assert (await client.get(page_of(THREAD))).status_code == 404
        again = await alice.post("/console/threads/delete", data=form)
        assert again.status_code == 200 and "Nothing to delete" in again.text
