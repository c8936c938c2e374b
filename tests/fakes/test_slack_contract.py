"""The fake Slack holds calls to Slack's documented contract (``tests/fakes/slack/contract.py``).

Every method the fake serves, and every method the product calls, has an entry citing its
reference page; each rule is shown with the real slack_sdk ``AsyncWebClient`` against the
fake: a missing argument, a wrong type, a stream's recipient outside a DM, text past its
limit, Block Kit Slack refuses. ``api_call`` sends a body as it is (no client-side help).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.render import approval_blocks, decided_blocks, feedback_blocks, markdown_blocks
from runtime import ApprovalDelivery
from tests.fakes.slack import FakeSlack
from tests.fakes.slack.contract import COMMON_ERRORS, CONTRACT, page
from tests.fakes.slack_clients import web

pytestmark = pytest.mark.timeout(20)

CHANNEL, DM, HUMAN, TEAM = "C0GENERAL1", "D0DIRECT01", "U0HUMAN001", "T0FAKE0001"
PRODUCT = Path(__file__).resolve().parents[2] / "channels" / "slack"




async def refused(fake: FakeSlack, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """Slack's answer to a call it refuses; the code must be one the method may answer."""
    with pytest.raises(SlackApiError) as caught:
        await web(fake).api_call(method, json=body)
    answer = caught.value.response.data
    assert isinstance(answer, dict)
    entry = CONTRACT[method]
    assert answer["error"] in entry.errors | entry.undocumented | COMMON_ERRORS, answer
    return answer


# -- coverage: the fake's methods and the product's calls


async def test_every_method_the_fake_serves_has_an_entry_citing_its_page(
        fake: FakeSlack) -> None:
    assert sorted(fake.served() - CONTRACT.keys()) == []
    for method, entry in CONTRACT.items():
        assert entry.page == page(method), method
    for method in ("files.info", "agents.sessions.setStatus", "agents.sessions.rename"):
        assert method in CONTRACT


async def test_a_method_served_without_an_entry_is_unknown_and_recorded(
        fake: FakeSlack) -> None:
    fake.api.extra["chat.meMessage"] = lambda params: {}
    with pytest.raises(SlackApiError) as caught:
        await web(fake).api_call("chat.meMessage", json={"channel": CHANNEL, "text": "hi"})
    answer = caught.value.response.data
    assert isinstance(answer, dict) and answer["error"] == "unknown_method"
    assert fake.uncovered == {"chat.meMessage"}


def slack_methods(snake: str) -> set[str]:
    """The Slack methods an ``AsyncWebClient`` method calls, read from slack_sdk itself:
    ``chat_postMessage`` -> chat.postMessage; ``files_upload_v2`` -> its two steps."""
    source = inspect.getsource(getattr(AsyncWebClient, snake))
    found = set(re.findall(r'api_call\(\s*"([\w.]+)"', source))
    for inner in set(re.findall(r"self\.(\w+)\(", source)) - {"api_call", snake}:
        if inner.split("_")[0] in ("files", "chat", "conversations", "users", "views"):
            found |= slack_methods(inner)
    return found


def product_calls() -> dict[str, set[str]]:
    """Each ``client.<method>`` the Slack channel's source names, with its Slack methods."""
    names: set[str] = set()
    for path in PRODUCT.glob("*.py"):
        names |= set(re.findall(r"\bclient\.([a-z]+_[A-Za-z0-9_]+)\b", path.read_text()))
    return {name: slack_methods(name) for name in sorted(names)
            if inspect.iscoroutinefunction(getattr(AsyncWebClient, name, None))}


@pytest.mark.parametrize(("snake", "methods"), [
    ("chat_postMessage", {"chat.postMessage"}),
    ("assistant_threads_setStatus", {"assistant.threads.setStatus"}),
    ("agents_sessions_setStatus", {"agents.sessions.setStatus"}),
    ("files_upload_v2", {"files.getUploadURLExternal", "files.completeUploadExternal"}),
])
def test_slack_sdk_names_map_to_slack_methods(snake: str, methods: set[str]) -> None:
    assert slack_methods(snake) == methods


def test_every_method_the_product_calls_has_an_entry() -> None:
    calls = product_calls()
    assert {"chat_postMessage", "chat_startStream", "auth_test"} <= calls.keys()  # it reads
    assert all(calls.values()), calls  # each name resolved to Slack methods
    missing = {snake: sorted(methods - CONTRACT.keys()) for snake, methods in calls.items()
               if methods - CONTRACT.keys()}
    assert missing == {}, f"the product calls methods the contract does not cover: {missing}"


# -- arguments: missing, of the wrong type


@pytest.mark.parametrize(("method", "body", "error", "field"), [
    ("chat.postMessage", {"text": "x"}, "channel_not_found", None),
    ("chat.postMessage", {"channel": CHANNEL}, "no_text", None),
    ("chat.update", {"channel": CHANNEL, "text": "x"}, "invalid_arguments", "ts"),
    ("chat.postEphemeral", {"channel": CHANNEL, "text": "x"}, "invalid_arguments", "user"),
    ("chat.delete", {"channel": CHANNEL}, "invalid_arguments", "ts"),
    ("chat.appendStream", {"channel": CHANNEL, "ts": "1.000001"}, "no_text", None),
    ("conversations.replies", {"channel": CHANNEL}, "thread_not_found", None),
    ("conversations.history", {}, "channel_not_found", None),
    ("reactions.add", {"channel": CHANNEL, "name": "eyes"}, "no_item_specified", None),
    ("reactions.remove", {"name": "eyes"}, "no_item_specified", None),
    ("assistant.threads.setTitle", {"channel_id": DM, "thread_ts": "1.000001"},
     "invalid_arguments", "title"),
    ("assistant.threads.setSuggestedPrompts", {"channel_id": DM}, "invalid_arguments",
     "prompts"),
    ("agents.sessions.setStatus", {"channel_id": CHANNEL, "status": "processing"},
     "thread_ts_required", None),
    ("agents.sessions.setStatus", {"channel_id": CHANNEL, "thread_ts": "1.000001"},
     "invalid_arguments", "status"),
    ("agents.sessions.rename", {"channel_id": CHANNEL, "thread_ts": "1.000001"},
     "invalid_arguments", "title"),
    ("files.getUploadURLExternal", {"filename": "a.txt"}, "invalid_arguments", "length"),
    ("files.completeUploadExternal", {"channel_id": CHANNEL}, "invalid_arguments", "files"),
    ("files.info", {}, "invalid_arguments", "file"),
    ("views.publish", {"user_id": HUMAN}, "invalid_arguments", "view"),
    ("users.info", {}, "invalid_arguments", "user"),
    ("conversations.info", {}, "channel_not_found", None),
])
async def test_a_missing_argument_answers_the_documented_error(
        fake: FakeSlack, method: str, body: dict[str, Any], error: str,
        field: str | None) -> None:
    answer = await refused(fake, method, body)
    assert answer["error"] == error
    if field is not None:
        assert f"[ERROR] missing required field: {field}" in \
            answer["response_metadata"]["messages"]
    assert fake.messages(CHANNEL) == []


@pytest.mark.parametrize(("method", "body", "error"), [
    ("chat.postMessage", {"channel": 42, "text": "x"}, "invalid_arguments"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "blocks": "[not json"},
     "invalid_blocks_format"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "blocks": {"type": "divider"}},
     "invalid_blocks_format"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "metadata": ["a"]},
     "invalid_metadata_format"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "unfurl_links": "maybe"},
     "invalid_arguments"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "thread_ts": 1.5},
     "invalid_arguments"),
    ("chat.postMessage", {"channel": CHANNEL, "text": "x", "markdown_text": "**x**"},
     "markdown_text_conflict"),
    ("conversations.history", {"channel": CHANNEL, "limit": "many"}, "invalid_arguments"),
    ("chat.startStream", {"channel": DM, "thread_ts": "1.000001", "chunks": {"a": 1}},
     "invalid_chunks"),
    ("chat.startStream", {"channel": DM, "thread_ts": "1.000001",
                          "chunks": [{"type": "confetti"}]}, "invalid_chunks"),
    ("chat.startStream", {"channel": DM, "thread_ts": "1.000001",
                          "task_display_mode": "grid"}, "invalid_arguments"),
    ("assistant.threads.setStatus", {"channel_id": DM, "thread_ts": "1.000001",
                                     "status": 5}, "invalid_arguments"),
    ("assistant.threads.setStatus", {"channel_id": DM, "thread_ts": "1.000001",
                                     "status": "x", "loading_messages": ["m"] * 11},
     "invalid_arguments"),
    ("agents.sessions.setStatus", {"channel_id": CHANNEL, "thread_ts": "1.000001",
                                   "status": "thinking"}, "invalid_status"),
    ("views.publish", {"user_id": HUMAN, "view": [1]}, "invalid_arguments"),
])
async def test_a_wrong_type_or_value_is_refused(fake: FakeSlack, method: str,
                                                body: dict[str, Any], error: str) -> None:
    assert (await refused(fake, method, body))["error"] == error
    assert fake.messages(CHANNEL) == [] and fake.messages(DM) == []


async def test_form_values_are_read_as_their_types(fake: FakeSlack) -> None:
    client = web(fake)
    root = fake.post_as_user(CHANNEL, HUMAN, "hi")
    await client.api_call("chat.postMessage", data={
        "channel": CHANNEL, "text": "x", "thread_ts": root["ts"], "unfurl_links": "false",
        "blocks": '[{"type": "divider"}]'})
    page_ = await client.conversations_replies(channel=CHANNEL, ts=root["ts"], limit=5,
                                               include_all_metadata=True)  # a GET: "1"
    assert [m["text"] for m in page_["messages"]] == ["hi", "x"]


# -- chat.startStream: a stream outside a DM goes to one person


@pytest.mark.parametrize(("channel", "recipient", "error"), [
    (CHANNEL, {}, "missing_recipient_team_id"),
    (CHANNEL, {"recipient_team_id": TEAM}, "missing_recipient_user_id"),
    (CHANNEL, {"recipient_user_id": HUMAN}, "missing_recipient_team_id"),
    ("G0PRIVATE1", {}, "missing_recipient_team_id"),
    (CHANNEL, {"recipient_user_id": HUMAN, "recipient_team_id": TEAM}, None),
    (DM, {}, None),
])
async def test_a_stream_outside_a_dm_needs_its_recipient(
        fake: FakeSlack, channel: str, recipient: dict[str, str], error: str | None) -> None:
    root = fake.post_as_user(channel, HUMAN, "tell me")
    client = web(fake)
    if error is None:
        started = await client.chat_startStream(
            channel=channel, thread_ts=root["ts"], markdown_text="Hel",
            recipient_user_id=recipient.get("recipient_user_id"),
            recipient_team_id=recipient.get("recipient_team_id"))
        await client.chat_appendStream(channel=channel, ts=started["ts"], markdown_text="lo")
        await client.chat_stopStream(channel=channel, ts=started["ts"])
        assert fake.messages(channel)[1]["text"] == "Hello"
        return
    with pytest.raises(SlackApiError) as caught:
        await client.api_call("chat.startStream", json={
            "channel": channel, "thread_ts": root["ts"], **recipient})
    assert caught.value.response["error"] == error
    assert error in CONTRACT["chat.startStream"].errors
    assert len(fake.messages(channel)) == 1


async def test_a_top_level_stream_is_for_channels_only(fake: FakeSlack) -> None:
    client = web(fake)
    started = await client.api_call("chat.startStream", json={
        "channel": CHANNEL, "recipient_user_id": HUMAN, "recipient_team_id": TEAM})
    assert fake.messages(CHANNEL)[0]["ts"] == started["ts"]
    answer = await refused(fake, "chat.startStream", {"channel": DM})
    assert "[ERROR] missing required field: thread_ts" in answer["response_metadata"]["messages"]


async def test_a_streaming_message_cannot_be_edited(fake: FakeSlack) -> None:
    root = fake.post_as_user(DM, HUMAN, "hi")
    client = web(fake)
    started = await client.chat_startStream(channel=DM, thread_ts=root["ts"])
    answer = await refused(fake, "chat.update", {"channel": DM, "ts": started["ts"],
                                                 "text": "edited"})
    assert answer["error"] == "streaming_state_conflict"
    await client.chat_stopStream(channel=DM, ts=started["ts"])
    await client.chat_update(channel=DM, ts=started["ts"], text="edited")


# -- limits


def long(n: int) -> str:
    return "x" * n


@pytest.mark.parametrize(("method", "body", "error"), [
    ("chat.postMessage", {"channel": CHANNEL, "text": long(40_001)}, "msg_too_long"),
    ("chat.postEphemeral", {"channel": CHANNEL, "user": HUMAN, "text": long(4_001)},
     "msg_too_long"),
    ("chat.startStream", {"channel": DM, "thread_ts": "ROOT", "markdown_text": long(12_001)},
     "invalid_arguments"),
    ("chat.startStream", {"channel": DM, "thread_ts": "ROOT",
                          "chunks": [{"type": "markdown_text", "text": long(12_001)}]},
     "invalid_chunks"),
    ("agents.sessions.setStatus", {"channel_id": DM, "thread_ts": "ROOT",
                                   "status": "processing", "title": long(201)},
     "invalid_arguments"),
])
async def test_text_past_its_documented_limit_is_refused(
        fake: FakeSlack, method: str, body: dict[str, Any], error: str) -> None:
    root = fake.post_as_user(DM, HUMAN, "hi")
    body = {k: root["ts"] if v == "ROOT" else v for k, v in body.items()}
    assert (await refused(fake, method, body))["error"] == error
    assert len(fake.messages(DM)) == 1 and fake.messages(CHANNEL) == []


async def test_the_limits_themselves_are_accepted(fake: FakeSlack) -> None:
    client = web(fake)
    posted = await client.chat_postMessage(channel=CHANNEL, text=long(40_000))
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text=long(4_000))
    answer = await refused(fake, "chat.update", {"channel": CHANNEL, "ts": posted["ts"],
                                                 "text": long(4_001)})
    assert answer["error"] == "msg_too_long"
    root = fake.post_as_user(DM, HUMAN, "hi")
    started = await client.chat_startStream(channel=DM, thread_ts=root["ts"],
                                            markdown_text=long(12_000))
    for method in ("chat.appendStream", "chat.stopStream"):
        answer = await refused(fake, method, {"channel": DM, "ts": started["ts"],
                                              "markdown_text": long(12_001)})
        assert answer["error"] == "invalid_arguments"
    await client.chat_appendStream(channel=DM, ts=started["ts"], markdown_text=long(12_000))
    await client.chat_stopStream(channel=DM, ts=started["ts"], markdown_text=long(12_000))
    assert len(fake.messages(DM)[1]["text"]) == 36_000


# -- Block Kit


def button(**fields: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": "go", "value": "v",
            "text": {"type": "plain_text", "text": "Go"}, **fields}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def feedback(value: str) -> dict[str, Any]:
    side = {"text": {"type": "plain_text", "text": "👍"}, "value": value}
    return {"type": "context_actions", "elements": [
        {"type": "feedback_buttons", "action_id": "vote", "positive_button": side,
         "negative_button": side}]}


BAD_BLOCKS: list[tuple[str, list[dict[str, Any]]]] = [
    ("51 blocks", [{"type": "divider"}] * 51),
    ("an unknown type", [{"type": "carousel"}]),
    ("a block without a type", [{"text": "x"}]),
    ("section text over 3,000", [section(long(3_001))]),
    ("a section without text or fields", [{"type": "section"}]),
    ("11 section fields", [{"type": "section", "fields": [
        {"type": "mrkdwn", "text": "f"}] * 11}]),
    ("markdown text over 12,000", [{"type": "markdown", "text": long(12_001)}]),
    ("markdown blocks over 12,000 together", [{"type": "markdown", "text": long(6_001)}] * 2),
    ("header text over 150", [{"type": "header", "text": {"type": "plain_text",
                                                          "text": long(151)}}]),
    ("a mrkdwn header", [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}]),
    ("button text over 75", [{"type": "actions", "elements": [
        button(text={"type": "plain_text", "text": long(76)})]}]),
    ("action_id over 255", [{"type": "actions", "elements": [button(action_id=long(256))]}]),
    ("button value over 2,000", [{"type": "actions", "elements": [
        button(value=long(2_001))]}]),
    ("a button style Slack has not", [{"type": "actions", "elements": [
        button(style="fancy")]}]),
    ("26 elements in actions", [{"type": "actions", "elements": [button()] * 26}]),
    ("11 elements in context", [{"type": "context", "elements": [
        {"type": "mrkdwn", "text": "c"}] * 11}]),
    ("a feedback value over 2,000", [feedback(long(2_001))]),
    ("block_id over 255", [{"type": "divider", "block_id": long(256)}]),
    ("rich_text without elements", [{"type": "rich_text"}]),
]


@pytest.mark.parametrize("blocks", [blocks for _, blocks in BAD_BLOCKS],
                         ids=[why for why, _ in BAD_BLOCKS])
async def test_blocks_slack_refuses_are_invalid_blocks(
        fake: FakeSlack, blocks: list[dict[str, Any]]) -> None:
    answer = await refused(fake, "chat.postMessage",
                           {"channel": CHANNEL, "text": "x", "blocks": blocks})
    assert answer["error"] == "invalid_blocks"
    assert answer["response_metadata"]["messages"][0].startswith("[ERROR] ")
    posted = await web(fake).chat_postMessage(channel=CHANNEL, text="x")
    assert (await refused(fake, "chat.update", {"channel": CHANNEL, "ts": posted["ts"],
                                                "text": "x", "blocks": blocks})
            )["error"] == "invalid_blocks"


async def test_what_the_product_renders_is_accepted(fake: FakeSlack) -> None:
    prompt = ApprovalDelivery(key="k", run_id="run-1", thread_id="t", channel="slack",
                              tool_call_id="call-1", name="shell",
                              arguments={"cmd": long(5_000)}, arguments_hash="h" * 64,
                              reason="requires_approval", asked_by=HUMAN)
    for blocks in (approval_blocks(prompt), decided_blocks("shell", True, HUMAN),
                   markdown_blocks(long(3_900)) + feedback_blocks("run-1"),
                   [section("ok"), {"type": "divider"}] * 25):
        await web(fake).chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
    assert len(fake.messages(CHANNEL)) == 4


async def test_stop_stream_counts_blocks_with_its_own_code(fake: FakeSlack) -> None:
    root = fake.post_as_user(DM, HUMAN, "hi")
    started = await web(fake).chat_startStream(channel=DM, thread_ts=root["ts"])
    body = {"channel": DM, "ts": started["ts"]}
    answer = await refused(fake, "chat.stopStream",
                           {**body, "blocks": [{"type": "divider"}] * 51})
    assert answer["error"] == "msg_blocks_too_many"
    answer = await refused(fake, "chat.stopStream", {**body, "blocks": [section(long(3_001))]})
    assert answer["error"] == "invalid_blocks"
    await web(fake).chat_stopStream(**body, blocks=feedback_blocks("run-1"))


@pytest.mark.parametrize(("why", "blocks"), [
    ("101 blocks", [{"type": "divider"}] * 101),
    ("a markdown block (messages only)", [{"type": "markdown", "text": "**hi**"}]),
    ("feedback buttons (messages only)", [feedback("up")]),
])
async def test_a_home_tab_slack_refuses_is_invalid_arguments(
        fake: FakeSlack, why: str, blocks: list[dict[str, Any]]) -> None:
    answer = await refused(fake, "views.publish", {
        "user_id": HUMAN, "view": {"type": "home", "blocks": blocks}})
    assert answer["error"] == "invalid_arguments", why
    assert fake.api.homes == {}
    await web(fake).views_publish(user_id=HUMAN, view={
        "type": "home", "blocks": [{"type": "divider"}] * 100})
