"""Threads have owners; a caller sees only its own (DESIGN §6,
docs/guides/approvals-and-rights.md, Security).

``may_see`` as a table; then the attack of the report through the real routes (Bob, who
may only talk, against Ana's threads and a Slack thread); then a property: random tokens
with random rights and thread patterns make threads through every entry point, and no
caller reads, continues or finds a thread outside its scope, on every route."""

from __future__ import annotations

import base64
import string
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.http.auth import Credential
from channels.http.config import OpenAIApiConfig
from channels.http.owners import Owner, may_see, owner_of
from runtime import Origin
from tests.http_helpers import echo_runtime, served, thread_url, tokens

ANA = {"Authorization": "Bearer t-ana"}
BOB = {"Authorization": "Bearer t-bob"}


def _who(name: str, *rights: Any, threads: tuple[str, ...] = ()) -> Credential:
    return Credential(name, f"t-{name}", frozenset(rights), threads)


@pytest.mark.parametrize(("who", "thread", "owner", "write", "seen"), [
    (_who("ana", "talk"), "t", Owner("caller", "ana"), False, True),
    (_who("bob", "talk"), "t", Owner("caller", "ana"), False, False),
    (_who("bob", "talk"), "t", Owner("caller", "ana"), True, False),
    (_who("bob", "talk"), "new", None, True, True),       # writing makes it bob's
    (_who("bob", "talk"), "new", None, False, False),     # reading nothing: 404
    (_who("bob", "talk", threads=("support/*",)), "support/1", Owner("caller", "ana"),
     False, True),
    (_who("bob", "talk", threads=("support/*",)), "sales/1", Owner("caller", "ana"),
     False, False),
    (_who("bob", "talk", threads=("*",)), "slack:T1:C2:1.2", Owner("place", "slack:T1:C2:1.2"),
     True, False),                                         # a platform's: operate only
    (_who("bob", "talk"), "slack:T1:C2:1.2", None, True, False),  # not even to make it
    (_who("bob", "talk"), "schedule:standup", None, True, False),
    (_who("op", "talk", "operate"), "slack:T1:C2:1.2", Owner("place", "slack"), True, True),
    (_who("op", "operate"), "t", Owner("caller", "ana"), False, True),
    (_who("carol", "approve"), "t", Owner("caller", "ana"), False, False),
])
def test_who_may_see_a_thread(who: Credential, thread: str, owner: Owner | None, write: bool,
                              seen: bool) -> None:
    assert may_see(who, thread, owner, write=write) is seen


@pytest.mark.parametrize(("thread", "origin", "owner"), [
    ("t", Origin(channel="http", user="ana"), Owner("caller", "ana")),
    ("t", Origin(channel="cli"), Owner("caller", "local")),
    ("t", Origin(channel="console", user="op"), Owner("caller", "op")),
    ("t", Origin(channel="slack", target={"channel": "C1"}), Owner("place", "slack")),
    ("schedule:standup", Origin(channel="schedule"), Owner("schedule", "schedule:standup")),
    ("slack:T:C:1", None, Owner("place", "slack:T:C:1")),
    ("t", None, None),
])
def test_a_threads_owner_is_what_made_it(thread: str, origin: Origin | None,
                                         owner: Owner | None) -> None:
    assert owner_of(thread, origin) == owner


async def test_bob_cannot_reach_anas_threads_on_any_route(tmp_path: Path) -> None:
    """The report's attack: Bob (talk only) with Ana's ids, her first exchange, her user
    name, and a Slack thread; each is a 404, as if it did not exist."""
    named = tokens(("ana", "t-ana", ["talk", "approve"]), ("bob", "t-bob", ["talk"]))
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=named, openai=OpenAIApiConfig(thread_from_user=True)) \
            as (client, _):
        mine = await client.post(thread_url("ana-notes", "/messages"),
                                 json={"text": "my secret"}, headers=ANA)
        assert mine.status_code == 200, mine.text
        run_id = mine.json()["run_id"]
        chat = await client.post("/v1/chat/completions", headers=ANA, json={
            "model": "maiden", "messages": [{"role": "user", "content": "hello"}]})
        anas_chat = chat.headers["x-maiden-thread"]
        response = await client.post("/v1/responses", headers=ANA,
                                     json={"model": "maiden", "input": "remember 42"})
        response_id = response.json()["id"]

        for path in (thread_url("ana-notes"), f"/v1/runs/{run_id}",
                     f"/v1/runs/{run_id}/events", f"/v1/responses/{response_id}",
                     thread_url(anas_chat)):
            got = await client.get(path, headers=BOB)
            assert got.status_code == 404, (path, got.text)
        assert (await client.get(thread_url("ana-notes"), headers=ANA)).status_code == 200
        wrote = await client.post(thread_url("ana-notes", "/messages"),
                                  json={"text": "bob was here"}, headers=BOB)
        assert wrote.status_code == 404
        listed = (await client.get("/v1/threads", headers=BOB)).json()
        assert listed["threads"] == [] and listed["total"] == 0
        assert (await client.get("/v1/runs", headers=BOB)).json()["runs"] == []
        assert (await client.get("/v1/runs", params={"thread_id": "ana-notes"},
                                 headers=BOB)).status_code == 404

        # The OpenAI wire: her thread named, her response continued, her exchange resent.
        named_chat = await client.post("/v1/chat/completions", headers={
            **BOB, "X-Maiden-Thread": "ana-notes"}, json={
            "model": "maiden", "messages": [{"role": "user", "content": "hi"}]})
        assert named_chat.status_code == 404
        metadata = await client.post("/v1/chat/completions", headers=BOB, json={
            "model": "maiden", "metadata": {"thread_id": anas_chat},
            "messages": [{"role": "user", "content": "hi"}]})
        assert metadata.status_code == 404
        continued = await client.post("/v1/responses", headers=BOB, json={
            "model": "maiden", "input": "and?", "previous_response_id": response_id})
        assert continued.status_code == 404
        resent = await client.post("/v1/chat/completions", headers=BOB, json={
            "model": "maiden", "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": chat.json()["choices"][0]["message"]["content"]},
                {"role": "user", "content": "what did I say?"}]})
        assert resent.status_code == 200
        assert resent.headers["x-maiden-thread"] != anas_chat  # a thread of his own
        as_ana = await client.post("/v1/chat/completions", headers=BOB, json={
            "model": "maiden", "user": "ana", "messages": [{"role": "user", "content": "x"}]})
        assert as_ana.headers["x-maiden-thread"] == "openai:user:bob:ana"

        # A Slack thread, made or not: an operator's to write into over HTTP.
        slack = await client.post(thread_url("slack:T1:C2:1700000000.000100", "/messages"),
                                  json={"text": "hi"}, headers=BOB)
        assert slack.status_code == 404
        texts = [r.text for r in await rt.records.runs(thread_id="ana-notes")]
        assert texts == ["my secret"]


async def test_files_and_the_console_show_a_caller_only_its_own(tmp_path: Path) -> None:
    """A file is fetched by who may see a thread that names it; the console signed in
    with Bob's token lists, shows and takes nothing of Ana's."""
    named = tokens(("ana", "t-ana", ["talk", "approve"]), ("bob", "t-bob", ["talk"]),
                   ("op", "t-op"))
    shared = base64.b64encode(b"ana's numbers\n").decode()
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, credentials=named) as (client, _):
        sent = await client.post(thread_url("ana-notes", "/messages"), headers=ANA, json={
            "text": "see this", "files": [{"name": "n.txt", "media_type": "text/plain",
                                           "data": shared}]})
        assert sent.status_code == 200, sent.text
        (entry, *_) = await rt.records.entries("ana-notes")
        digest = entry.files[0].digest  # type: ignore[union-attr]
        assert (await client.get(f"/v1/files/{digest}", headers=ANA)).status_code == 200
        assert (await client.get(f"/v1/files/{digest}", headers=BOB)).status_code == 404
        assert (await client.get(f"/v1/files/{digest}", headers={
            "Authorization": "Bearer t-op"})).status_code == 200
        run_id = sent.json()["run_id"]
        async with httpx.AsyncClient(base_url=str(client.base_url), timeout=10) as browser:
            signed = await browser.post("/sign-in", data={"token": "t-bob"})
            assert signed.status_code == 303
            assert "ana-notes" not in (await browser.get("/threads")).text
            assert (await browser.get(thread_url("ana-notes").replace("/v1", ""))
                    ).status_code == 404
            assert (await browser.get(f"/runs/{run_id}")).status_code == 404
            assert run_id not in (await browser.get("/runs")).text
            assert (await browser.get(f"/files/{digest}")).status_code == 404


# -- the property ---------------------------------------------------------------------------

NAMES = ("ana", "bob", "cy")
ROUTES = ("threads", "chat", "responses")

tokens_strategy = st.lists(
    st.tuples(st.sets(st.sampled_from(["approve", "operate"])),
              st.lists(st.sampled_from(["s*", "s1", "o*", "*"]), max_size=2)),
    min_size=3, max_size=3)
threads_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(ROUTES),
              st.text(string.ascii_lowercase[:3] + "s", min_size=1, max_size=2)),
    min_size=1, max_size=4)


def _oracle(caller: int, rights: set[str], patterns: list[str], thread: str,
            made_by: int) -> bool:
    """What the docs promise, written apart from the code under test."""
    return "operate" in rights or made_by == caller or (
        not thread.startswith(("slack:", "discord:", "schedule:"))
        and any(fnmatchcase(thread, p) for p in patterns))


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=tokens_strategy, made=threads_strategy)
async def test_no_caller_sees_a_thread_outside_its_scope(
        tmp_path_factory: pytest.TempPathFactory,
        spec: list[tuple[set[str], list[str]]], made: list[tuple[int, str, str]]) -> None:
    named = tokens(*[(NAMES[i], f"t-{NAMES[i]}", ["talk", *sorted(rights)], patterns)
                     for i, (rights, patterns) in enumerate(spec)])
    auth = [{"Authorization": f"Bearer t-{n}"} for n in NAMES]
    db = tmp_path_factory.mktemp("owners") / "m.db"
    async with echo_runtime(db) as rt, served(rt, credentials=named) as (client, _):
        threads: dict[str, tuple[int, str]] = {}  # thread -> (its maker, one run of it)
        for maker, route, name in made:
            run = await _make(client, auth[maker], route, f"{name}{len(threads)}")
            if run is not None and run[0] not in threads:
                threads[run[0]] = (maker, run[1])
        for caller, (rights, patterns) in enumerate(spec):
            listed = {t["thread_id"] for t in (await client.get(
                "/v1/threads", headers=auth[caller])).json()["threads"]}
            for thread, (maker, run_id) in threads.items():
                seen = _oracle(caller, rights, patterns, thread, maker)
                assert (thread in listed) is seen, (NAMES[caller], thread)
                for path in (thread_url(thread), f"/v1/runs/{run_id}",
                             f"/v1/responses/resp_{run_id}"):
                    got = await client.get(path, headers=auth[caller])
                    assert got.status_code == (200 if seen else 404), (NAMES[caller], path)
                named_chat = await client.post("/v1/chat/completions", headers={
                    **auth[caller], "X-Maiden-Thread": thread}, json={
                    "model": "maiden", "messages": [{"role": "user", "content": "more"}]})
                assert named_chat.status_code == (200 if seen else 404), (NAMES[caller], thread)


async def _make(client: httpx.AsyncClient, auth: dict[str, str], route: str, name: str
                ) -> tuple[str, str] | None:
    """A thread made by ``auth`` through ``route``: (its id, its run), or None if refused."""
    if route == "threads":
        sent = await client.post(thread_url(name, "/messages"), json={"text": "hi"},
                                 headers=auth)
        return (name, sent.json()["run_id"]) if sent.status_code == 200 else None
    if route == "chat":
        sent = await client.post("/v1/chat/completions", headers=auth, json={
            "model": "maiden", "messages": [{"role": "user", "content": f"hi {name}"}]})
        return (sent.headers["x-maiden-thread"], sent.headers["x-maiden-run"]) \
            if sent.status_code == 200 else None
    sent = await client.post("/v1/responses", headers=auth,
                             json={"model": "maiden", "input": f"hi {name}"})
    if sent.status_code != 200:
        return None
    run_id = sent.json()["id"].removeprefix("resp_")
    return sent.json()["conversation"]["id"], run_id
