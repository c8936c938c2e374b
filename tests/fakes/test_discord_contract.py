"""The fake Discord holds requests to Discord's documented contract (``contract.CONTRACT``).

The table covers every route the fake serves and every route the product calls, named as
discord.py's ``Route`` names them, each citing its reference page; each rule is driven here
by the real discord.py HTTP client: a body past a limit is a 400 ``50035`` with the errors tree
(and ``discord.HTTPException`` with that code), an empty message ``50006``. 429s are in
``test_discord_rate_limits.py``; the product's own flows against the fake, and what has no
entry, in ``test_discord_coverage.py``.
"""

from __future__ import annotations

import ast
import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import discord
import pytest
from discord.http import HTTPClient, Route

from tests.fakes.discord import GENERAL_ID, GUILD_ID, HUMAN_ID, FakeDiscord, contract
from tests.fakes.discord import payloads as p
from tests.fakes.discord.routes import route_pattern

pytestmark = pytest.mark.timeout(30)

DOCS = "https://discord.com/developers/docs/"
DISCORD_PY = Path(discord.__file__).parent
PRODUCT = Path(__file__).resolve().parents[2] / "channels" / "discord"


def route_literals(*files: Path) -> set[tuple[str, str]]:
    """Every ``Route('METHOD', '/path', ...)`` written out in these files."""
    found = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", None) != "Route":
                continue
            written = [str(a.value) for a in node.args[:2] if isinstance(a, ast.Constant)]
            if len(written) == 2:
                found.add((written[0], written[1]))
    return found


def covering(method: str, path: str) -> contract.Endpoint | None:
    """The entry whose template matches ``path`` (its own ``{...}`` as any segment)."""
    for endpoint in contract.CONTRACT:
        m, pattern = route_pattern(f"{endpoint.method} {endpoint.path}")
        if m == method and pattern.match(path):
            return endpoint
    return None


# -- (a) the table: every route served has an entry, named as discord.py names it

def test_every_route_served_has_an_entry_and_every_entry_is_served() -> None:
    served = {(m, t) for m, t, _ in FakeDiscord().rest.table()}
    listed = {(e.method, e.path) for e in contract.CONTRACT}
    assert served == listed
    assert len(listed) == len(contract.CONTRACT)  # one entry per route


def test_each_entry_cites_its_reference_page_and_discord_pys_name() -> None:
    named = route_literals(DISCORD_PY / "http.py", DISCORD_PY / "webhook" / "async_.py",
                           *PRODUCT.glob("*.py"))
    for endpoint in contract.CONTRACT:
        assert endpoint.doc.startswith(DOCS) and "#" in endpoint.doc, endpoint
        assert any(path == endpoint.path for _, path in named), endpoint.path


def test_every_route_the_product_names_has_an_entry() -> None:
    named = route_literals(*PRODUCT.glob("*.py"))
    assert ("PATCH", "/webhooks/{application_id}/{token}/messages/@original") in named
    for method, path in named:
        assert covering(method, path) is not None, f"{method} {path}"


# -- the rules, through discord.py's HTTP client

@asynccontextmanager
async def client() -> AsyncIterator[tuple[FakeDiscord, HTTPClient]]:
    async with FakeDiscord() as fake:
        http = HTTPClient(asyncio.get_running_loop(), connector=fake.connector())
        await http.static_login(fake.token)
        try:
            yield fake, http
        finally:
            await http.close()


async def refused(http: HTTPClient, fake: FakeDiscord, route: Route, **options: Any
                  ) -> tuple[discord.HTTPException, Any]:
    """The exception discord.py raised, and the JSON the fake answered."""
    with pytest.raises(discord.HTTPException) as caught:
        await http.request(route, **options)
    return caught.value, fake.calls()[-1].answer


def errors_at(path: str, code: str) -> dict[str, Any]:
    tree: dict[str, Any] = {"_errors": [code]}
    for part in reversed(path.split(".") if path else []):
        tree = {part: tree}
    return tree


def codes(errors: Any) -> Any:
    """The errors tree with each ``_errors`` list cut to its codes."""
    if isinstance(errors, dict):
        return {k: [e["code"] for e in v] if k == "_errors" else codes(v)
                for k, v in errors.items()}
    return errors


def button(**fields: Any) -> dict[str, Any]:
    return {"type": 2, "style": 1, "label": "Go", "custom_id": "go", **fields}


def row(*buttons: dict[str, Any]) -> dict[str, Any]:
    return {"type": 1, "components": list(buttons)}


def embed(**fields: Any) -> dict[str, Any]:
    return {"title": "t", **fields}


MESSAGE_RULES: list[tuple[str, dict[str, Any], str, str]] = [
    # (what, create-message body, where in the errors tree, code)
    ("content over 2,000", {"content": "x" * 2001}, "content", "BASE_TYPE_MAX_LENGTH"),
    ("content not a string", {"content": 7}, "content", "STRING_TYPE_CONVERT"),
    ("eleven embeds", {"embeds": [embed()] * 11}, "embeds", "BASE_TYPE_MAX_LENGTH"),
    ("a title over 256", {"embeds": [embed(title="t" * 257)]}, "embeds.0.title",
     "BASE_TYPE_MAX_LENGTH"),
    ("a description over 4,096", {"embeds": [embed(description="d" * 4097)]},
     "embeds.0.description", "BASE_TYPE_MAX_LENGTH"),
    ("26 fields", {"embeds": [embed(fields=[{"name": "n", "value": "v"}] * 26)]},
     "embeds.0.fields", "BASE_TYPE_MAX_LENGTH"),
    ("a field name over 256", {"embeds": [embed(fields=[{"name": "n" * 257, "value": "v"}])]},
     "embeds.0.fields.0.name", "BASE_TYPE_MAX_LENGTH"),
    ("a field value over 1,024", {"embeds": [embed(fields=[{"name": "n",
                                                            "value": "v" * 1025}])]},
     "embeds.0.fields.0.value", "BASE_TYPE_MAX_LENGTH"),
    ("a field without a value", {"embeds": [embed(fields=[{"name": "n"}])]},
     "embeds.0.fields.0.value", "BASE_TYPE_REQUIRED"),
    ("a footer over 2,048", {"embeds": [embed(footer={"text": "f" * 2049})]},
     "embeds.0.footer.text", "BASE_TYPE_MAX_LENGTH"),
    ("embeds over 6,000 in all", {"embeds": [embed(description="d" * 4000)] * 2}, "embeds",
     "MAX_EMBED_SIZE_EXCEEDED"),
    ("six action rows", {"components": [row(button(custom_id=f"b{i}")) for i in range(6)]},
     "components", "BASE_TYPE_MAX_LENGTH"),
    ("six buttons in a row", {"components": [row(*(button(custom_id=f"b{i}")
                                                   for i in range(6)))]},
     "components.0.components", "BASE_TYPE_BAD_LENGTH"),
    ("an empty row", {"content": "x", "components": [row()]}, "components.0.components",
     "BASE_TYPE_BAD_LENGTH"),
    ("a button outside a row", {"components": [button()]}, "components.0.type",
     "BASE_TYPE_CHOICES"),
    ("a button without custom_id", {"components": [row(button(custom_id=None))]},
     "components.0.components.0.custom_id", "BASE_TYPE_REQUIRED"),
    ("a custom_id over 100", {"components": [row(button(custom_id="c" * 101))]},
     "components.0.components.0.custom_id", "BASE_TYPE_BAD_LENGTH"),
    ("an empty custom_id", {"components": [row(button(custom_id=""))]},
     "components.0.components.0.custom_id", "BASE_TYPE_BAD_LENGTH"),
    ("the same custom_id twice", {"components": [row(button(), button())]},
     "components.0.components.1.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED"),
    ("a label over 80", {"components": [row(button(label="l" * 81))]},
     "components.0.components.0.label", "BASE_TYPE_MAX_LENGTH"),
    ("a button style 7", {"components": [row(button(style=7))]},
     "components.0.components.0.style", "BASE_TYPE_CHOICES"),
    ("a link without url", {"components": [row(button(style=5, custom_id=None))]},
     "components.0.components.0.url", "BASE_TYPE_REQUIRED"),
    ("a link with custom_id", {"components": [row(button(style=5, url="https://x.test"))]},
     "components.0.components.0.custom_id", "BASE_TYPE_INVALID"),
    ("parse users and a users list", {"content": "hi", "allowed_mentions": {
        "parse": ["users"], "users": ["1"]}}, "allowed_mentions",
     "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE"),
    ("an unknown mention type", {"content": "hi", "allowed_mentions": {"parse": ["all"]}},
     "allowed_mentions.parse.0", "BASE_TYPE_CHOICES"),
    ("a nonce over 25", {"content": "hi", "nonce": "n" * 26}, "nonce", "BASE_TYPE_MAX_LENGTH"),
    ("EPHEMERAL on a channel message", {"content": "hi", "flags": 64}, "flags",
     "MESSAGE_FLAGS_INVALID"),
    ("content with IS_COMPONENTS_V2", {"content": "hi", "flags": 1 << 15}, "content",
     "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2"),
    ("a forward without its channel", {"message_reference": {"type": 1, "message_id": "1"}},
     "message_reference.channel_id", "BASE_TYPE_REQUIRED"),
]


@pytest.mark.parametrize(("what", "body", "where", "code"), MESSAGE_RULES,
                         ids=[r[0] for r in MESSAGE_RULES])
async def test_a_message_past_a_documented_limit_is_an_invalid_form_body(
        what: str, body: dict[str, Any], where: str, code: str) -> None:
    async with client() as (fake, http):
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL_ID)
        error, answer = await refused(http, fake, route, json=body)
        assert (error.status, error.code) == (400, 50035)
        assert answer["message"] == "Invalid Form Body"
        assert codes(answer["errors"]) == errors_at(where, code)
        assert f"In {where}" in error.text or where == ""
        assert fake.messages(GENERAL_ID) == []


async def test_every_fault_is_listed_at_once_and_limits_count_trimmed_text() -> None:
    async with client() as (fake, http):
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL_ID)
        _, answer = await refused(http, fake, route, json={
            "content": "x" * 2001, "embeds": [embed()] * 11, "tts": "yes"})
        assert codes(answer["errors"]) == {
            "content": {"_errors": ["BASE_TYPE_MAX_LENGTH"]},
            "embeds": {"_errors": ["BASE_TYPE_MAX_LENGTH"]},
            "tts": {"_errors": ["BOOLEAN_TYPE_CONVERT"]}}
        # "Leading and trailing whitespace characters are not included"
        await http.request(route, json={"embeds": [embed(title=" " * 100 + "t" * 256)]})
        (kept,) = fake.messages(GENERAL_ID)
        assert len(kept["embeds"][0]["title"]) == 356


@pytest.mark.parametrize("body", [{}, {"content": ""}, {"content": None, "embeds": []},
                                  {"tts": True, "allowed_mentions": {"parse": []}}])
async def test_a_message_with_nothing_to_show_is_50006(body: dict[str, Any]) -> None:
    async with client() as (fake, http):
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL_ID)
        error, answer = await refused(http, fake, route, json=body)
        assert (error.status, error.code) == (400, 50006)
        assert answer == {"message": "Cannot send an empty message", "code": 50006}


async def test_an_edit_emptying_a_message_is_50006_and_unknown_flags_are_ignored() -> None:
    async with client() as (fake, http):
        sent = await http.request(Route("POST", "/channels/{channel_id}/messages",
                                        channel_id=GENERAL_ID), json={"content": "hi"})
        edit = Route("PATCH", "/channels/{channel_id}/messages/{message_id}",
                     channel_id=GENERAL_ID, message_id=sent["id"])
        error, _ = await refused(http, fake, edit, json={"content": ""})
        assert error.code == 50006
        error, answer = await refused(http, fake, edit, json={"content": "x" * 2001})
        assert codes(answer["errors"]) == errors_at("content", "BASE_TYPE_MAX_LENGTH")
        # Edit Message: "unsupported flag changes are currently ignored without error"
        edited = await http.request(edit, json={"content": "ok", "flags": 64})
        assert edited["content"] == "ok"


def interaction(fake: FakeDiscord, *, autocomplete: bool = False) -> Route:
    """A click on a button (or an autocomplete) the fake has dispatched, and its callback."""
    if autocomplete:
        data = p.command_interaction("maiden", [], HUMAN_ID, GENERAL_ID, GUILD_ID,
                                     autocomplete=True)
    else:
        shown = p.message(p.new_id(), GENERAL_ID, fake.world.bot, "go?",
                          components=[row(button())])
        data = p.component_interaction("go", HUMAN_ID, GENERAL_ID, shown, GUILD_ID)
    fake.rest.interactions.remember(data)
    return Route("POST", "/interactions/{webhook_id}/{webhook_token}/callback",
                 webhook_id=data["id"], webhook_token=data["token"])


CALLBACK_RULES: list[tuple[str, dict[str, Any], str, str]] = [
    ("an unknown type", {"type": 3}, "type", "BASE_TYPE_CHOICES"),
    ("content over 2,000", {"type": 4, "data": {"content": "x" * 2001}}, "data.content",
     "BASE_TYPE_MAX_LENGTH"),
    ("data not an object", {"type": 4, "data": "hi"}, "data", "MODEL_TYPE_CONVERT"),
    ("eleven embeds", {"type": 4, "data": {"embeds": [embed()] * 11}}, "data.embeds",
     "BASE_TYPE_MAX_LENGTH"),
    ("a flag a response may not set", {"type": 4, "data": {"content": "x", "flags": 2}},
     "data.flags", "MESSAGE_FLAGS_INVALID"),
    ("a deferral with a flag but EPHEMERAL", {"type": 5, "data": {"flags": 4}}, "data.flags",
     "BASE_TYPE_CHOICES"),
    ("an update with a bad button", {"type": 7, "data": {"components": [row(button(
        custom_id="c" * 101))]}}, "data.components.0.components.0.custom_id",
     "BASE_TYPE_BAD_LENGTH"),
    ("a modal titled over 45", {"type": 9, "data": {"custom_id": "m", "title": "t" * 46,
                                                    "components": [{"type": 18}]}},
     "data.title", "BASE_TYPE_MAX_LENGTH"),
    ("choices for a click", {"type": 8, "data": {"choices": []}}, "type",
     "BASE_TYPE_CHOICES"),
]


@pytest.mark.parametrize(("what", "body", "where", "code"), CALLBACK_RULES,
                         ids=[r[0] for r in CALLBACK_RULES])
async def test_an_interaction_response_is_held_to_its_type(
        what: str, body: dict[str, Any], where: str, code: str) -> None:
    async with client() as (fake, http):
        error, answer = await refused(http, fake, interaction(fake), json=body)
        assert (error.status, error.code) == (400, 50035)
        assert codes(answer["errors"]) == errors_at(where, code)
        assert fake.interaction_responses() == []


async def test_a_response_needs_a_message_and_autocomplete_at_most_25_choices() -> None:
    async with client() as (fake, http):
        error, _ = await refused(http, fake, interaction(fake), json={"type": 4, "data": {}})
        assert error.code == 50006
        many = [{"name": f"c{i}", "value": f"c{i}"} for i in range(26)]
        _, answer = await refused(http, fake, interaction(fake, autocomplete=True),
                                  json={"type": 8, "data": {"choices": many}})
        assert codes(answer["errors"]) == errors_at("data.choices", "BASE_TYPE_MAX_LENGTH")
        await http.request(interaction(fake, autocomplete=True),
                           json={"type": 8, "data": {"choices": many[:25]}})
        assert [r.type for r in fake.interaction_responses()] == [8]


def command(name: str = "maiden", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "what maiden does", "type": 1, **fields}


def option(name: str, *, required: bool = False) -> dict[str, Any]:
    return {"type": 3, "name": name, "description": "d", "required": required}


COMMAND_RULES: list[tuple[str, list[dict[str, Any]], str, str]] = [
    ("a capital in a name", [command("Maiden")], "0.name", "STRING_TYPE_REGEX"),
    ("a name over 32", [command("m" * 33)], "0.name", "BASE_TYPE_BAD_LENGTH"),
    ("no description", [command(description="")], "0.description", "BASE_TYPE_BAD_LENGTH"),
    ("the same name twice", [command(), command()], "1.name",
     "APPLICATION_COMMANDS_DUPLICATE_NAME"),
    ("101 slash commands", [command(f"c{i}") for i in range(101)], "",
     "APPLICATION_COMMANDS_TOO_MANY"),
    ("a required option after an optional one",
     [command(options=[option("a"), option("b", required=True)])], "0.options.0",
     "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID"),
    ("an option type 12", [command(options=[dict(option("a"), type=12)])],
     "0.options.0.type", "BASE_TYPE_CHOICES"),
]


@pytest.mark.parametrize(("what", "body", "where", "code"), COMMAND_RULES,
                         ids=[r[0] for r in COMMAND_RULES])
async def test_commands_are_held_to_the_naming_and_limits(
        what: str, body: list[dict[str, Any]], where: str, code: str) -> None:
    async with client() as (fake, http):
        route = Route("PUT", "/applications/{application_id}/guilds/{guild_id}/commands",
                      application_id=fake.world.app_id, guild_id=GUILD_ID)
        error, answer = await refused(http, fake, route, json=body)
        assert (error.status, error.code) == (400, 50035)
        assert codes(answer["errors"]) == errors_at(where, code)
        assert fake.rest.commands == {}


@pytest.mark.parametrize(("query", "where", "code"), [
    ({"limit": 101}, "limit", "NUMBER_TYPE_MAX"), ({"limit": 0}, "limit", "NUMBER_TYPE_MIN"),
    ({"limit": "many"}, "limit", "NUMBER_TYPE_COERCE"),
    ({"before": 1, "after": 2}, "", "BASE_TYPE_INVALID")])
async def test_history_is_read_within_its_query_rules(query: dict[str, Any], where: str,
                                                      code: str) -> None:
    async with client() as (fake, http):
        route = Route("GET", "/channels/{channel_id}/messages", channel_id=GENERAL_ID)
        _, answer = await refused(http, fake, route, params=query)
        assert codes(answer["errors"]) == errors_at(where, code)


async def test_files_are_named_files_n_and_at_most_10_mib() -> None:
    async with client() as (fake, http):
        route = Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL_ID)
        for name, data, status, code in (("file", b"x", 400, 50035),
                                         ("files[0]", b"x" * (10 * 1024 * 1024 + 1), 413,
                                          40005)):
            form = [{"name": "payload_json", "value": '{"content": ""}'},
                    {"name": name, "value": io.BytesIO(data), "filename": "a.txt",
                     "content_type": "text/plain"}]
            error, _ = await refused(http, fake, route, form=form)
            assert (error.status, error.code) == (status, code)
        assert fake.messages(GENERAL_ID) == []


async def test_a_follow_up_is_always_waited_for_and_after_a_deferral_is_the_answer() -> None:
    """create-followup-message: "wait is always true"; "directly after responding with
    DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE" it edits the loading message instead."""
    async with client() as (fake, http):
        callback = interaction(fake)
        await http.request(callback, json={"type": 5, "data": {"flags": 64}})
        token = callback.url.split("/")[-2]
        follow = Route("POST", "/webhooks/{webhook_id}/{webhook_token}",
                       webhook_id=fake.world.app_id, webhook_token=token)
        first = await http.request(follow, json={"content": "the answer"})
        second = await http.request(follow, json={"content": "and more", "flags": 64})
    (answer, more) = fake.ephemerals(GENERAL_ID)
    assert (answer["id"], answer["content"], answer["flags"]) == (first["id"], "the answer", 64)
    assert (more["id"], more["content"]) == (second["id"], "and more")
