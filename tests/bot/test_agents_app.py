"""Two agents in one `maiden run`, composed from agent.toml as the app does: a Slack message
in each channel reaches its agent's prompt and model (the fake OpenAI server records
both) with only that agent's tools offered; a schedule is run by the agent it names; the
OpenAI wire lists the agents as models."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot import load_config
from bot.app import App, open_app, open_channels
from bot.wiring import Prepared
from channels.http import HttpChannel
from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import Records
from schedules import Scheduler
from tests.fakes import openai
from tests.fakes.openai import OpenAIServer
from tests.fakes.slack import BOT_USER, FakeSlack

SUPPORT, ENG = "C0SUPPORT01", "C0ENGINEER1"

CONFIG = """
[provider]
kind = "openai"
model = "strong-model"
base_url = "{url}"
api_key_env = "MAIDEN_TEST_OPENAI_KEY"
stream = false

[tools]
builtins = ["clock", "memory"]

[[providers]]
name = "cheap"
kind = "openai"
model = "cheap-model"
base_url = "{url}"
api_key_env = "MAIDEN_TEST_OPENAI_KEY"
stream = false

[[agents]]
name = "support"
system_prompt = "You are careful support."
provider = "cheap"
builtins = ["clock"]

[[agents]]
name = "eng"
default = true
system_prompt = "You are an engineer."

[[routes]]
place = "{support}"
agent = "support"

[[schedules]]
name = "nightly"
cron = "0 3 * * *"
prompt = "check the tickets"
agent = "support"

[http]
port = 0
"""


@asynccontextmanager
async def two_agents(tmp_path: Path, model: OpenAIServer, fake: FakeSlack
                     ) -> AsyncIterator[App]:
    path = tmp_path / "agent.toml"
    path.write_text(textwrap.dedent(CONFIG.format(url=model.base_url, support=SUPPORT)))
    loaded = load_config(path)

    def slack(records: Records) -> Prepared:
        out = SlackOutbound(SlackConfig(api_url=fake.api_url, open=True),
                            SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                                         signing_secret="s" * 32), records, pace_s=0)
        return Prepared(out.name, out.deliverer, out.fetcher,
                        lambda runtime, *_: SlackChannel(runtime, out))

    async with open_app(loaded, recover=True, serve=True, channels=[slack]) as app, \
            AsyncExitStack() as stack:
        await open_channels(stack, app.runtime, [p.make(app.runtime, None, None)
                                                 for p in app.channels])
        await fake.wait_connected()
        yield app


@pytest.fixture
async def model(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenAIServer]:
    monkeypatch.setenv("MAIDEN_TEST_OPENAI_KEY", "sk-test-key")
    async with OpenAIServer() as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as started:
        yield started


def asked(body: Any) -> tuple[str, str, list[str]]:
    """A request's model, system prompt and the names of the tools it offered."""
    system = body["messages"][0]
    assert system["role"] in ("system", "developer")
    return body["model"], system["content"], sorted(t["function"]["name"]
                                                   for t in body.get("tools", []))


async def test_each_channel_reaches_its_agents_prompt_model_and_tools(
        tmp_path: Path, model: OpenAIServer, fake: FakeSlack) -> None:
    model.queue(openai.completion("support here"), openai.completion("eng here"))
    async with two_agents(tmp_path, model, fake) as app:
        for n, channel in enumerate((SUPPORT, ENG), 1):
            sent = fake.user_event(channel, "U1", f"<@{BOT_USER}> question {n}", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await fake.wait_messages(channel, 2)
            await app.runtime.idle()
        replies = [[m["text"] for m in fake.messages(c) if m.get("user") == BOT_USER]
                   for c in (SUPPORT, ENG)]
        runs = await app.runtime.records.runs()
    assert replies == [["support here"], ["eng here"]]
    assert [r.agent for r in runs] == ["support", "eng"]
    support, eng = (asked(r.json) for r in model.requests)
    assert support == ("cheap-model", "You are careful support.", ["clock"])
    assert eng[:2] == ("strong-model", "You are an engineer.")
    assert eng[2] == sorted(["clock", "remember", "recall", "forget", "schedule_create",
                             "schedule_list", "schedule_pause", "schedule_resume",
                             "schedule_delete"])


async def test_a_schedule_is_run_by_the_agent_it_names(
        tmp_path: Path, model: OpenAIServer, fake: FakeSlack) -> None:
    model.queue(openai.completion("no tickets open"))
    async with two_agents(tmp_path, model, fake) as app:
        run = await Scheduler(app.book, app.runtime).run_now("nightly")
        ended = await app.runtime.wait(run.id)
    # Not the default agent (eng): the one the schedule names.
    assert ended.agent == "support" and ended.reply == "no tickets open"
    assert asked(model.requests[0].json)[:2] == ("cheap-model", "You are careful support.")


async def test_the_openai_wire_lists_the_agents_and_a_new_thread_takes_the_one_asked(
        tmp_path: Path, model: OpenAIServer, fake: FakeSlack) -> None:
    model.queue(openai.completion("support on the wire"))
    async with two_agents(tmp_path, model, fake) as app, AsyncExitStack() as stack:
        loaded = load_config(tmp_path / "agent.toml")
        cfg = loaded.config
        http = HttpChannel(app.runtime, cfg.http, cfg.http.credentials(), openai=cfg.openai_api)
        await open_channels(stack, app.runtime, [http])
        async with httpx.AsyncClient(base_url=http.url, timeout=30) as client:
            listed = (await client.get("/v1/models")).json()
            answer = (await client.post("/v1/chat/completions", json={
                "model": "support", "messages": [{"role": "user", "content": "hello"}]})).json()
            unknown = await client.post("/v1/chat/completions", json={
                "model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]})
    assert [m["id"] for m in listed["data"]] == ["eng", "support"]  # the default first
    assert answer["model"] == "support"
    assert answer["choices"][0]["message"]["content"] == "support on the wire"
    assert asked(model.requests[0].json)[:2] == ("cheap-model", "You are careful support.")
    assert unknown.status_code == 404 and "'support', 'eng'" in unknown.json()["error"]["message"]
