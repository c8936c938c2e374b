"""A Slack button decides only its own run, in its own place (DESIGN §6, ``channels.clicks``):
a value carried onto another message, in another channel or the same one, is refused with
an ephemeral line and decides nothing; a vote likewise. Through the real bolt app and a
fake Slack; one case over the Events API with genuinely signed requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from channels.clicks import FOREIGN
from channels.http import HttpChannel, HttpConfig
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import (
    EchoProvider,
    Records,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from tests.channels.slack.test_channel import SECRET, C, Slack, config, running, secrets
from tests.fakes.slack import (
    BOT_USER,
    FakeSlack,
    block_actions_payload,
    feedback_click,
    signed_event,
    signed_interaction,
)

C2 = "C0SECOND002"
RULES = [  # U1 talks and approves in C only; U2 in C2 only
    {"place": C, "users": ["U1"], "rights": ["talk", "approve"]},
    {"place": C2, "users": ["U2"], "rights": ["talk", "approve"]},
]

ran: list[str] = []


@tool(requires_approval=True)
def shell(command: str) -> str:
    """Run a shell command."""
    ran.append(command)
    return f"ran {command}"


def bot_messages(fake: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [m for m in fake.messages(channel) if m.get("user") == BOT_USER]


def approve_button(prompt: dict[str, Any]) -> dict[str, Any]:
    button: dict[str, Any] = prompt["blocks"][1]["elements"][0]
    assert button["action_id"] == "maiden_approve"
    return button


async def ask(fake: FakeSlack, s: Slack, channel: str, user: str, command: str
              ) -> dict[str, Any]:
    """``user`` asks for ``command`` in a new thread of ``channel``: the approval prompt."""
    sent = fake.user_event(channel, user, f'<@{BOT_USER}> /tool shell {{"command": '
                           f'"{command}"}}', mention=True)
    await fake.acked(await fake.socket_event(sent))
    await s.runtime.idle()
    return bot_messages(fake, channel)[-1]


async def click(fake: FakeSlack, user: str, channel: str, on: dict[str, Any],
                value: str) -> None:
    payload = block_actions_payload(user, channel, on["ts"], "maiden_approve", value,
                                    message=on)
    await fake.acked(await fake.socket_interactive(payload))


async def test_another_channels_value_on_this_channels_prompt_decides_nothing(
        tmp_path: Path) -> None:
    ran.clear()
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(shell,),
                                            allow_users=[], rules=RULES) as s:
        first = await ask(fake, s, C, "U1", "rm -rf /srv/c1")
        second = await ask(fake, s, C2, "U2", "uptime")
        theirs, mine = await s.runtime.records.pending_approvals(channel="slack")
        assert theirs.origin.target["channel"] == C and mine.origin.target["channel"] == C2

        # U2, an approver in C2 only, clicks C2's prompt carrying C1's value.
        await click(fake, "U2", C2, second, approve_button(first)["value"])
        await fake.until(lambda: bool(fake.ephemerals(C2)), what="a refusal")
        (refusal,) = fake.ephemerals(C2)
        assert refusal["user"] == "U2" and refusal["text"] == FOREIGN
        await s.runtime.idle()
        for run in (theirs, mine):
            still = await s.runtime.records.get_run(run.id)
            assert still.state == "awaiting_approval" and still.decisions == ()
        assert ran == []
        assert "Approved" not in str(next(m for m in fake.messages(C2)
                                          if m["ts"] == second["ts"])["blocks"])

        # Each prompt with its own value still works, for whoever may approve there.
        await click(fake, "U2", C2, second, approve_button(second)["value"])
        done = await s.runtime.wait(mine.id)
        assert done.state == "completed" and [d.by for d in done.decisions] == ["U2"]
        assert ran == ["uptime"]
        assert (await s.runtime.records.get_run(theirs.id)).state == "awaiting_approval"


async def test_a_value_moved_from_another_prompt_in_the_same_channel_decides_nothing(
        tmp_path: Path) -> None:
    ran.clear()
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", tools=(shell,),
                                            allow_users=[], rules=RULES) as s:
        first = await ask(fake, s, C, "U1", "deploy prod")
        second = await ask(fake, s, C, "U1", "echo hi")
        one, two = await s.runtime.records.pending_approvals(channel="slack")
        # U1 may approve both, but the first prompt's value on the second prompt is neither.
        await click(fake, "U1", C, second, approve_button(first)["value"])
        await fake.until(lambda: bool(fake.ephemerals(C)), what="a refusal")
        assert [e["text"] for e in fake.ephemerals(C)] == [FOREIGN]
        await s.runtime.idle()
        for run in (one, two):
            assert (await s.runtime.records.get_run(run.id)).decisions == ()
        assert ran == []


async def test_a_vote_carrying_another_channels_run_is_refused(tmp_path: Path) -> None:
    rules = [{"place": C, "users": ["U1"], "rights": ["talk"]},
             {"place": C2, "users": ["U2"], "rights": ["talk"]}]
    async with FakeSlack() as fake, running(fake, tmp_path / "m.db", stream="off",
                                            provider=EchoProvider(), allow_users=[],
                                            rules=rules) as s:
        for channel, user in ((C, "U1"), (C2, "U2")):
            sent = fake.user_event(channel, user, f"<@{BOT_USER}> hello", mention=True)
            await fake.acked(await fake.socket_event(sent))
        await s.runtime.idle()
        (here,) = bot_messages(fake, C)
        (there_run,) = [r for r in await s.runtime.records.runs()
                        if r.origin.target["channel"] == C2]
        # U1 clicks 👍 under C1's answer, the value naming C2's run.
        forged = feedback_click("U1", C, here, positive=True)
        forged["actions"][0]["value"] = f"up:{there_run.id}"
        await fake.acked(await fake.socket_interactive(forged))
        await fake.until(lambda: bool(fake.ephemerals(C)), what="a refusal")
        assert [(e["user"], e["text"]) for e in fake.ephemerals(C)] == [("U1", FOREIGN)]
        assert await s.runtime.kept.feedback.votes() == []

        await fake.acked(await fake.socket_interactive(
            feedback_click("U1", C, here, positive=True)))  # its own value: counted
        await fake.until(lambda: len(fake.ephemerals(C)) == 2, what="thanks")
        (vote,) = await s.runtime.kept.feedback.votes()
        assert vote.run_id != there_run.id and vote.place == C


async def test_over_the_events_api_a_signed_click_with_another_runs_value_is_refused(
        tmp_path: Path) -> None:
    """The same as the first case, each request signed with the app's signing secret."""
    ran.clear()
    async with FakeSlack() as fake, SQLiteStore(tmp_path / "m.db") as store:
        slack = SlackOutbound(config(fake, mode="http", allow_users=[], rules=RULES),
                              secrets(fake), Records(store), pace_s=0)
        rt = Runtime(store, EchoProvider(), ToolRegistry([shell]),
                     settings=RuntimeConfig(poll_interval_s=0.1),
                     deliverers={"slack": slack.deliverer})
        async with rt, SlackChannel(rt, slack) as channel:
            http = HttpChannel(rt, HttpConfig(port=0), None,
                               routes=[("/slack/events", channel.http_endpoint)])
            async with http, httpx.AsyncClient(base_url=http.url) as client:
                prompts = []
                for where, user, command in ((C, "U1", "rm -rf /srv/c1"), (C2, "U2", "ls")):
                    sent = fake.user_event(where, user, f'<@{BOT_USER}> /tool shell '
                                           f'{{"command": "{command}"}}', mention=True)
                    body, headers = signed_event(sent, SECRET)
                    assert (await client.post("/slack/events", content=body,
                                              headers=headers)).status_code == 200
                    await rt.idle()
                    prompts.append(bot_messages(fake, where)[-1])
                first, second = prompts
                forged = block_actions_payload("U2", C2, second["ts"], "maiden_approve",
                                               approve_button(first)["value"], message=second)
                body, headers = signed_interaction(forged, SECRET)
                assert (await client.post("/slack/events", content=body,
                                          headers=headers)).status_code == 200
                await fake.until(lambda: bool(fake.ephemerals(C2)), what="a refusal")
                assert [e["text"] for e in fake.ephemerals(C2)] == [FOREIGN]
                await rt.idle()
                for run in await rt.records.runs():
                    assert run.state == "awaiting_approval" and run.decisions == ()
                assert ran == []
