"""/v1/memories (docs/guides/memory-and-knowledge.md, Seeing and correcting what it knows):
a token without ``operate`` sees what it said and what is about it, and nothing else exists
for it (404, never 403 on one it may not see); ``operate`` sees, edits and forgets all;
behind the same token, Host and Origin checks as every route."""

from __future__ import annotations

from pathlib import Path

from runtime import EchoProvider, Memory, Runtime, RuntimeConfig, SQLiteStore
from runtime.model.memories import PersonScope, PlaceScope, WorkspaceScope
from tests.channels.memory_seeds import plant, said
from tests.http_helpers import served, tokens

CREDENTIALS = tokens(("ops", "t-ops"), ("alice", "t-alice", ["talk"]),
                     ("bob", "t-bob", ["talk"]))


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def planted(rt: Runtime) -> dict[str, Memory]:
    return {
        "alice's": await plant(rt, "alice deploys on tuesdays", WorkspaceScope(),
                               said("http", "alice", None, "a1")),
        "about alice": await plant(rt, "alice prefers short answers",
                                   PersonScope(user="http:alice"),
                                   said("slack", "U9", "C1", "slack:T:C1:1")),
        "bob's": await plant(rt, "bob's secret plan", WorkspaceScope(),
                             said("http", "bob", None, "b1")),
        "slack": await plant(rt, "the wiki moved", PlaceScope(channel="slack", place="C1"),
                             said("slack", "U9", "C1", "slack:T:C1:2")),
    }


async def test_who_sees_edits_and_forgets_which_memory(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1)) as rt:
        kept = await planted(rt)
        async with served(rt, credentials=CREDENTIALS) as (client, _):
            def texts(answer: dict[str, list[dict[str, str]]]) -> set[str]:
                return {m["text"] for m in answer["memories"]}

            alice = (await client.get("/v1/memories", headers=as_("t-alice"))).json()
            assert texts(alice) == {"alice deploys on tuesdays", "alice prefers short answers"}
            shown = next(m for m in alice["memories"] if m["id"] == kept["alice's"].id)
            assert shown["source"].startswith("http:alice, http thread a1, ")
            assert shown["scope"] == {"kind": "workspace"} and shown["edited_by"] is None
            everything = (await client.get("/v1/memories")).json()  # ops: all of them
            assert len(everything["memories"]) == 4
            place = await client.get("/v1/memories", params={"scope": "place"})
            assert texts(place.json()) == {"the wiki moved"}
            found = await client.get("/v1/memories", params={"q": "wiki plan", "limit": 1})
            assert len(found.json()["memories"]) == 1
            thread = await client.get("/v1/memories", params={"thread_id": "b1"})
            assert texts(thread.json()) == {"bob's secret plan"}
            assert (await client.get("/v1/memories", params={"scope": "x"})).status_code == 422

            bobs = "/v1/memories/" + kept["bob's"].id
            for method in ("GET", "DELETE"):
                hidden = await client.request(method, bobs, headers=as_("t-alice"))
                assert hidden.status_code == 404, hidden.text
            hidden = await client.patch(bobs, json={"text": "mine"}, headers=as_("t-alice"))
            assert hidden.status_code == 404
            assert (await client.get("/v1/memories/nope")).status_code == 404

            # About alice, said by another: she may forget it, not put words in their mouth.
            about = f"/v1/memories/{kept['about alice'].id}"
            refused = await client.patch(about, json={"text": "x"}, headers=as_("t-alice"))
            assert refused.status_code == 403
            own = "/v1/memories/" + kept["alice's"].id
            edited = await client.patch(own, json={"text": "alice deploys on wednesdays"},
                                        headers=as_("t-alice"))
            assert edited.status_code == 200, edited.text
            assert edited.json()["edited_by"] == "http:alice"
            assert (await client.get(own)).json()["text"] == "alice deploys on wednesdays"
            empty = await client.patch(own, json={"text": ""}, headers=as_("t-alice"))
            assert empty.status_code == 422
            gone = await client.delete(about, headers=as_("t-alice"))
            assert gone.json() == {"id": kept["about alice"].id, "existed": True}
            assert (await client.get(about)).status_code == 404

            # A foreign Origin changes nothing; operate edits and forgets anyone's.
            foreign = await client.delete(bobs, headers={"Origin": "https://evil.example"})
            assert foreign.status_code in (400, 403)
            assert (await client.get(bobs)).status_code == 200
            by_ops = await client.patch(bobs, json={"text": "bob's plan, shared"})
            assert by_ops.json()["edited_by"] == "http:ops"
            assert (await client.delete(bobs)).json()["existed"] is True
            assert (await client.get("/v1/memories", headers={"Authorization": ""})
                    ).status_code == 401


async def test_forgetting_a_person_needs_operate_and_takes_theirs_only(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1)) as rt:
        kept = await planted(rt)
        async with served(rt, credentials=CREDENTIALS) as (client, _):
            forget = {"person": "http:alice"}
            for token in ("t-alice", "t-bob"):  # not even one's own self: operate only
                refused = await client.delete("/v1/memories", params=forget,
                                              headers=as_(token))
                assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
            assert len((await client.get("/v1/memories")).json()["memories"]) == 4
            foreign = await client.delete("/v1/memories", params=forget,
                                          headers={"Origin": "https://evil.example"})
            assert foreign.status_code in (400, 403)
            assert (await client.delete("/v1/memories")).status_code == 422
            assert (await client.delete("/v1/memories", params={"person": "a\nb"})
                    ).status_code == 422

            gone = await client.delete("/v1/memories", params=forget)  # ops may

            assert gone.status_code == 200, gone.text
            assert gone.json() == {"person": "http:alice", "memories": 2}
            left = (await client.get("/v1/memories")).json()["memories"]
            assert {m["id"] for m in left} == {kept["bob's"].id, kept["slack"].id}
            for mine in ("alice's", "about alice"):
                assert await rt.kept.memories.lookup(kept[mine].id) is None
            again = await client.delete("/v1/memories", params=forget)
            assert again.json() == {"person": "http:alice", "memories": 0}
