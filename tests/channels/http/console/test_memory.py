"""The console's Memory page, on the real server: a search box and a table of memories with
their scope, source (linked to the thread and run where the session may see them), expiry
and editor; an operator sees, edits and forgets every memory, anyone else only their own
(what they said through the API or the console, what is about them); every action behind
the session's CSRF token; htmx swaps the row."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from runtime import Memory, Runtime
from runtime.model.memories import PersonScope, PlaceScope, WorkspaceScope
from tests.channels.memory_seeds import plant, said
from tests.http_helpers import echo_runtime, served, thread_url, tokens

PEOPLE = tokens(("alice", "tok-alice-operator"), ("bob", "tok-bob-talker", ["talk"]))


@asynccontextmanager
async def console(tmp_path: Path) -> AsyncIterator[tuple[Runtime, dict[str, Memory],
                                                         dict[str, httpx.AsyncClient]]]:
    """Memories of bob's and others', and a browser signed in as alice and as bob."""
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=PEOPLE) as (api, _):
        made = await api.post(thread_url("bob-thread", "/messages"), json={"text": "hi"},
                              headers={"Authorization": "Bearer tok-bob-talker"})
        run_id = made.json()["run_id"]
        bobs = said("http", "bob", None, "bob-thread").model_copy(update={"run_id": run_id})
        kept = {
            "bob's": await plant(rt, "bob <b>deploys</b> on fridays", WorkspaceScope(), bobs),
            "about bob": await plant(rt, "bob likes tea", PersonScope(user="console:bob"),
                                     said("slack", "U9", "C1", "slack:T:C1:1")),
            "others'": await plant(rt, "the wiki moved", PlaceScope(channel="slack",
                                                                     place="C1"),
                                   said("slack", "U9", "C1", "slack:T:C1:2")),
        }
        clients = {}
        for name, token in (("alice", "tok-alice-operator"), ("bob", "tok-bob-talker")):
            client = httpx.AsyncClient(base_url=str(api.base_url), timeout=10.0)
            assert (await client.post("/sign-in", data={"token": token})).status_code == 303
            clients[name] = client
        try:
            yield rt, kept, clients
        finally:
            for client in clients.values():
                await client.aclose()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html[:500]
    return found[1]


async def test_who_sees_edits_and_forgets_on_the_memory_page(tmp_path: Path) -> None:
    async with console(tmp_path) as (rt, kept, who):
        alice = await who["alice"].get("/memory")
        assert alice.status_code == 200
        assert '<a href="/memory" aria-current="page">Memory</a>' in alice.text
        assert alice.text.count('<tr id="memory-') == 3
        assert "bob &lt;b&gt;deploys&lt;/b&gt; on fridays" in alice.text  # escaped
        run_id = kept["bob's"].provenance.run_id
        assert f'<a href="/threads/bob-thread">thread</a> · <a href="/runs/{run_id}">run</a>' \
            in alice.text
        searched = await who["alice"].get("/memory", params={"q": "wiki", "scope": "place"})
        assert searched.text.count('<tr id="memory-') == 1 and "the wiki moved" in searched.text
        bad = await who["alice"].get("/memory", params={"scope": "nope"})
        assert bad.status_code == 422

        bob = (await who["bob"].get("/memory")).text
        assert bob.count('<tr id="memory-') == 2 and "the wiki moved" not in bob
        assert bob.count("<summary>edit</summary>") == 1  # his own, not the one about him
        assert "slack:T:C1:1" not in bob.split("bob likes tea")[1].split("</tr>")[0]
        csrf = csrf_of(bob)

        # Not bob's to see: as if there were none.
        refused = await who["bob"].post("/console/memories/forget", data={
            "csrf": csrf, "id": kept["others'"].id})
        assert refused.status_code == 404
        refused = await who["bob"].post("/console/memories/edit", data={
            "csrf": csrf, "id": kept["about bob"].id, "text": "bob hates tea"})
        assert refused.status_code == 403
        stale = await who["bob"].post("/console/memories/forget", data={
            "csrf": "0" * 64, "id": kept["about bob"].id})
        assert stale.status_code == 403
        assert await rt.kept.memories.lookup(kept["about bob"].id) is not None

        bob_id = kept["bob's"].id
        edited = await who["bob"].post("/console/memories/edit", headers={"HX-Request": "true"},
                                       data={"csrf": csrf, "id": kept["bob's"].id,
                                             "text": "bob deploys on mondays"})
        assert edited.status_code == 200
        assert edited.text.lstrip().startswith(f'<tr id="memory-{bob_id}"')
        assert "bob deploys on mondays" in edited.text and "console:bob" in edited.text
        gone = await who["bob"].post("/console/memories/forget", headers={"HX-Request": "true"},
                                     data={"csrf": csrf, "id": kept["about bob"].id})
        assert gone.status_code == 200 and gone.text == ""
        assert await rt.kept.memories.lookup(kept["about bob"].id) is None

        # The operator, without htmx: back to the page.
        csrf = csrf_of(alice.text)
        done = await who["alice"].post("/console/memories/forget", data={
            "csrf": csrf, "id": kept["others'"].id})
        assert done.status_code == 303 and done.headers["location"] == "/memory"
        left = (await who["alice"].get("/memory")).text
        assert left.count('<tr id="memory-') == 1
        async with httpx.AsyncClient(base_url=str(who["alice"].base_url)) as stranger:
            assert (await stranger.get("/memory")).status_code == 303
