"""The operator console over HTTP, on the real server: sign-in, CSRF, escaping, and every
page and action going through the runtime's public API."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from runtime import (
    Agent,
    AgentConfig,
    Agents,
    EchoProvider,
    Origin,
    RouteConfig,
    RunState,
    Runtime,
    RuntimeConfig,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from schedules import ScheduleConfig
from tests.clock import Clock
from tests.http_helpers import echo_runtime, scheduled, served, tokens

TOKEN = "s3cret-console-token"


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


@asynccontextmanager
async def browser(runtime: Runtime, *, token: str | None = TOKEN, sign_in: bool = True,
                  **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no bearer header (a browser), signed in through the form."""
    """(The token is alice's, with every right.)"""
    credentials = tokens(("alice", token)) if token else None
    async with served(runtime, credentials=credentials, **settings) as (api, _), \
            httpx.AsyncClient(base_url=str(api.base_url), timeout=10.0) as client:
        if sign_in and token:
            signed = await client.post("/sign-in", data={"token": token})
            assert signed.status_code == 303, signed.text
        elif sign_in:
            assert (await client.get("/")).status_code == 200  # takes the session
        yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html[:500]
    return found[1]


async def test_signing_in_with_the_token(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            browser(rt, sign_in=False) as client:
        first = await client.get("/runs?state=failed")
        assert first.status_code == 303
        assert first.headers["location"] == "/sign-in?next=" + quote("/runs?state=failed",
                                                                    safe="")
        form = await client.get("/sign-in")
        assert form.status_code == 200 and 'type="password"' in form.text
        wrong = await client.post("/sign-in", data={"token": "guess", "next": "/runs"})
        assert wrong.status_code == 401 and "That is not one of the tokens." in wrong.text
        assert "maiden_console" not in wrong.headers.get("set-cookie", "")
        # The name comes from the token: a name in the form is not taken.
        right = await client.post("/sign-in", data={"token": TOKEN, "operator": "bob",
                                                    "next": "//evil.example/"})
        assert right.status_code == 303 and right.headers["location"] == "/"
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
        now = await client.get("/")
        assert now.status_code == 200 and "alice" in now.text and "bob" not in now.text
        # The API is not opened by the console's cookie: it still wants the bearer token.
        assert (await client.get("/v1/runs")).status_code == 401
        # A forged cookie is no session.
        client.cookies.set("maiden_console", "a.Ym9i.0000")
        assert (await client.get("/")).status_code == 303
        assert (await client.get("/console/live/now")).status_code == 401


async def test_every_page_has_a_strict_policy_and_shows_no_secret(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        await rt.send("t1", "hello")
        run = (await rt.records.runs())[-1]
        for path in ("/", "/approvals", "/threads", "/threads/t1", "/runs", f"/runs/{run.id}",
                     "/schedules", "/spend", "/spend?days=30", "/memory", "/knowledge",
                     "/sign-in"):
            page = await client.get(path)
            assert page.status_code == 200, (path, page.text[:300])
            policy = page.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "script-src 'self'" in policy, path
            assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
            assert page.headers["x-content-type-options"] == "nosniff"
            assert TOKEN not in page.text, path
            assert "<script>" not in page.text  # scripts come from files only
            assert not re.search(r"<[^>]+\son\w+=", page.text), path  # no inline handlers
        assets = await client.get("/console/static/htmx.min.js")
        assert assets.status_code == 200 and "htmx" in assets.text[:2000]


async def test_thread_text_and_tool_output_are_escaped(tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        await rt.send("evil<b>", hostile)
        page = await client.get("/threads/" + quote("evil<b>", safe=""))
        assert page.status_code == 200
        assert hostile not in page.text and "<script>alert" not in page.text
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
        assert "evil&lt;b&gt;" in page.text
        listing = await client.get("/threads")
        assert "evil&lt;b&gt;" in listing.text and "evil<b>" not in listing.text


async def test_actions_need_the_csrf_token_and_a_session(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        assert run.state is RunState.AWAITING_APPROVAL
        cancel = f"/console/runs/{run.id}/cancel"
        missing = await client.post(cancel, data={})
        assert missing.status_code == 403 and "CSRF" in missing.text
        wrong = await client.post(cancel, data={"csrf": "0" * 64})
        assert wrong.status_code == 403
        assert (await rt.records.get_run(run.id)).state is RunState.AWAITING_APPROVAL
        client.cookies.clear()
        anonymous = await client.post(cancel, data={"csrf": "0" * 64})
        assert anonymous.status_code == 401
        assert (await rt.records.get_run(run.id)).state is RunState.AWAITING_APPROVAL


async def test_approve_from_the_inbox_bound_to_the_arguments(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy], approvers=["alice"]) as rt, \
            browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        inbox = await client.get("/approvals")
        assert "deploy" in inbox.text and "&#34;service&#34;: &#34;api&#34;" in inbox.text
        assert f'value="{run.id}"' in inbox.text
        pending = run.pending_approval
        assert pending is not None
        form = {"csrf": csrf_of(inbox.text), "run_id": run.id,
                "tool_call_id": pending.tool_call_id, "decision": "approve",
                "arguments_hash": "changed-since-the-page-was-drawn"}
        stale = await client.post("/console/decide", data=form)
        assert stale.status_code == 409, stale.text
        assert (await rt.records.get_run(run.id)).state is RunState.AWAITING_APPROVAL
        form["arguments_hash"] = pending.arguments_hash
        decided = await client.post("/console/decide", data=form)
        assert decided.status_code == 303
        assert decided.headers["location"] == f"/approvals?decided={run.id}"
        done = await rt.wait(run.id)
        assert done.state is RunState.COMPLETED
        assert done.decisions[-1].by == "alice"


async def test_an_operator_not_among_the_approvers_sees_no_buttons(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy], approvers=["carol"]) as rt, \
            browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        inbox = await client.get("/approvals")
        assert "Only carol may decide" in inbox.text and "Approve</button>" not in inbox.text
        pending = run.pending_approval
        assert pending is not None
        refused = await client.post("/console/decide", data={
            "csrf": csrf_of(inbox.text), "run_id": run.id, "decision": "approve",
            "tool_call_id": pending.tool_call_id, "arguments_hash": pending.arguments_hash})
        assert refused.status_code == 409 and "may not decide" in refused.text


async def test_each_run_shows_the_buttons_its_own_agents_approvers_allow(tmp_path: Path
                                                                         ) -> None:
    """Two agents, two lists of approvers: alice may decide the engineers' run, not the
    support run (carol's), on the approvals page and on each run's page."""
    tools = ToolRegistry([deploy])
    agents = Agents([
        Agent(AgentConfig(name="support", approvers=["carol"]), EchoProvider(), tools),
        Agent(AgentConfig(name="eng", approvers=["alice"]), EchoProvider(), tools),
    ], (RouteConfig(thread_prefix="eng-", agent="eng"),))
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, agents=agents, settings=RuntimeConfig(concurrency="thread")) as rt, \
            browser(rt) as client:
        support = await rt.send("help-1", '/tool deploy {"service": "api"}')
        eng = await rt.send("eng-1", '/tool deploy {"service": "db"}')
        assert (support.agent, eng.agent) == ("support", "eng")
        inbox = await client.get("/approvals")
        articles = {run_id: body for run_id, body in re.findall(
            r'<article class="approval" data-run="([0-9a-f]+)">(.*?)</article>', inbox.text,
            re.S)}
        assert "Approve</button>" in articles[eng.id]
        assert "Approve</button>" not in articles[support.id]
        assert "Only carol may decide this one" in articles[support.id]
        assert "may decide this one" not in articles[eng.id]
        assert "Approve</button>" in (await client.get(f"/runs/{eng.id}")).text
        assert "Approve</button>" not in (await client.get(f"/runs/{support.id}")).text


async def test_cancel_and_resume_from_the_run_page(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        page = await client.get(f"/runs/{run.id}")
        assert "Cancel</button>" in page.text and "Resume</button>" not in page.text
        token = csrf_of(page.text)
        cancelled = await client.post(f"/console/runs/{run.id}/cancel", data={"csrf": token})
        assert cancelled.status_code == 303
        assert (await rt.records.get_run(run.id)).state is RunState.CANCELLED
        page = await client.get(f"/runs/{run.id}")
        assert "Resume</button>" in page.text and "cancelled" in page.text
        resumed = await client.post(f"/console/runs/{run.id}/resume", data={"csrf": token})
        assert resumed.status_code == 303
        # Cancelled while it waited for the approval: resumed, it asks again.
        again = await rt.wait(run.id)
        assert again.state is RunState.AWAITING_APPROVAL and again.pending_approval is not None
        assert "Approve</button>" in (await client.get(f"/runs/{run.id}")).text
        twice = await client.post(f"/console/runs/{run.id}/resume", data={"csrf": token})
        assert twice.status_code == 409  # it has not stopped


async def test_send_a_message_and_follow_its_reply(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        empty = await client.get("/threads/" + quote("new one", safe=""))
        assert empty.status_code == 404 and 'name="thread" value="new one"' in empty.text
        token = csrf_of(empty.text)
        sent = await client.post("/console/send", data={"csrf": token, "thread": "new one",
                                                        "text": "hi <there>"})
        assert sent.status_code == 303
        assert sent.headers["location"].startswith("/threads/new%20one#run-")
        streamed = await client.post("/console/send", headers={"HX-Request": "true"},
                                     data={"csrf": token, "thread": "new one",
                                           "text": "again"})
        assert streamed.status_code == 200
        found = re.search(r'sse-connect="/console/live/runs/(\w+)"', streamed.text)
        assert found, streamed.text
        await rt.wait(found[1])
        events = await client.get(f"/console/live/runs/{found[1]}")
        assert events.headers["content-type"].startswith("text/event-stream")
        assert "event: end" in events.text and "echo: again" in events.text
        thread = await client.get("/threads/" + quote("new one", safe=""))
        assert "hi &lt;there&gt;" in thread.text and "echo: again" in thread.text
        runs = await rt.records.runs(thread_id="new one")
        assert [r.origin.channel for r in runs] == ["console", "console"]
        assert runs[0].origin.user == "alice"


async def test_runs_filters_and_the_spend_chart(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        for i in range(3):
            await rt.send(f"t{i}", "hello")
        listed = await client.get("/runs", params={"state": "completed", "since": "24h"})
        assert listed.text.count('class="state state-completed"') == 3
        none = await client.get("/runs", params={"state": "failed"})
        assert "No runs match." in none.text
        one = await client.get("/runs", params={"thread": "t1"})
        assert one.text.count('class="state state-completed"') == 1
        assert 'href="/threads/t1"' in one.text and 'href="/threads/t0"' not in one.text
        spend = await client.get("/spend")
        assert spend.text.count('<rect class="bar"') == 2 * 7  # cost and tokens per day
        assert "3 runs" in spend.text
        month = await client.get("/spend?days=30")
        assert month.text.count('<rect class="bar"') == 2 * 30


async def test_without_a_token_on_loopback_no_sign_in_is_asked(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            browser(rt, token=None, sign_in=False) as client:
        page = await client.get("/")
        assert page.status_code == 200 and "maiden_console" in page.headers["set-cookie"]
        named = await client.post("/sign-in", data={"operator": "dana"})
        assert named.status_code == 303
        now = (await client.get("/")).text
        assert "local" in now and "dana" not in now  # no token: everyone is local


async def test_the_console_can_be_switched_off(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            browser(rt, sign_in=False, console=False) as client:
        assert (await client.get("/")).status_code == 404
        assert (await client.get("/console/static/htmx.min.js")).status_code == 404


async def test_a_one_shot_is_listed_with_its_time_and_kept_done(tmp_path: Path) -> None:
    due = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(due - timedelta(hours=1))
    configs = [ScheduleConfig(name="launch", at="2026-03-02T09:00:00+00:00",
                              say="launch day")]
    async with echo_runtime(tmp_path / "m.db") as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            browser(rt, schedules=scheduler) as client:
        before = await client.get("/schedules")
        assert "once at" in before.text and "2026-03-02T09:00:00+00:00" in before.text
        assert "<em>done</em>" not in before.text
        clock.now = due + timedelta(seconds=1)
        (fired,) = await scheduler.fire_due()
        assert (await rt.wait(fired.run.id)).reply == "launch day"
        after = await client.get("/schedules")
        assert "<em>done</em>" in after.text, after.text


async def test_schedules_history_run_now_pause_and_resume(tmp_path: Path) -> None:
    slot = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    clock = Clock(slot - timedelta(hours=2, minutes=5))
    configs = [ScheduleConfig(name="hourly", cron="0 * * * *", prompt="the hourly check")]
    async with echo_runtime(tmp_path / "m.db") as rt, \
            scheduled(rt, tmp_path / "m.db", configs, clock) as scheduler, \
            browser(rt, schedules=scheduler) as client:
        clock.now = slot + timedelta(seconds=2)
        (fired,) = await scheduler.fire_due()
        await rt.wait(fired.run.id)
        listing = await client.get("/schedules")
        assert "hourly" in listing.text and "0 * * * *" in listing.text
        page = await client.get("/schedules/hourly")
        assert page.status_code == 200
        rows = re.findall(r'<tr><td><span class="when">(2026-03-02T\d\d:00:00\+00:00)</span>',
                          page.text)
        assert rows == ["2026-03-02T09:00:00+00:00", "2026-03-02T08:00:00+00:00",
                        "2026-03-02T07:00:00+00:00"]
        assert "<td>in thread schedule:hourly</td>" in page.text  # beside "completed"
        assert page.text.count("no run") >= 2
        token = csrf_of(page.text)
        ran = await client.post("/console/schedules/hourly/run", data={"csrf": token})
        assert ran.status_code == 303 and ran.headers["location"].startswith("/runs/")
        paused = await client.post("/console/schedules/hourly/pause", data={"csrf": token})
        assert paused.status_code == 303
        assert "paused" in (await client.get("/schedules/hourly")).text
        assert (await scheduler.listing())[0]["paused"] is True
        await client.post("/console/schedules/hourly/resume", data={"csrf": token})
        assert (await scheduler.listing())[0]["paused"] is False
        missing = await client.get("/schedules/nope")
        assert missing.status_code == 404


async def test_the_now_panel_streams_as_html_events(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, browser(rt) as client:
        run = await rt.send("ops", '/tool deploy {"service": "api"}')
        async with client.stream("GET", "/console/live/now") as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            assert "default-src 'self'" in events.headers["content-security-policy"]
            seen = ""
            async for line in events.aiter_lines():
                seen += line + "\n"
                if line == "" and "event: now" in seen:
                    break
        assert seen.startswith("event: now\ndata: ")
        assert f'data-run="{run.id}"' in seen and "awaiting approval" in seen
        assert "1 approval waiting" in seen
        assert re.search(r'name="csrf" value="[0-9a-f]{64}"', seen)  # its Cancel works too


async def test_votes_show_on_the_run_and_on_the_spend_page(tmp_path: Path) -> None:
    slack = Origin(channel="slack", user="U1", target={"channel": "C1", "thread_ts": "1.2"})
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        run = await rt.submit("slack:T:C1:1.2", "hello", origin=slack)
        await rt.wait(run.id)
        await rt.kept.feedback.vote(run.id, "up", user="U1", channel="slack", message="171.5")
        await rt.kept.feedback.vote(run.id, "down", user="U<b>2", channel="slack")
        page = (await client.get(f"/runs/{run.id}")).text
        # (drawn, not emoji: a machine without an emoji font shows them too)
        assert 'id="feedback"' in page and page.count('<td><svg class="icon"') == 2
        assert page.count('aria-label="up"') == 1 and page.count('aria-label="down"') == 1
        assert "slack · U&lt;b&gt;2" in page and "<code>171.5</code>" in page
        spend = (await client.get("/spend")).text
        assert re.search(r'<strong>1 <svg[^>]*aria-label="up".*?</svg>\s*</strong> · '
                         r'<strong>1 <svg[^>]*aria-label="down"', spend)
        assert '<a href="/threads/slack%3AT%3AC1%3A1.2">slack:T:C1:1.2</a></td><td>1</td>' \
            '<td>1</td>' in spend
        quiet = (await client.get(f"/runs/{(await rt.send('t', 'hi')).id}")).text
        assert 'id="feedback"' not in quiet


async def test_the_run_page_links_to_the_runs_trace(tmp_path: Path) -> None:
    """``[otel] trace_url``: the run page links to the run's trace, by its trace id."""
    from opentelemetry.sdk.trace import TracerProvider

    from runtime.engine.tracing import OtelTracing

    tracing = OtelTracing(TracerProvider(), trace_url="https://tempo.example/trace/{trace_id}")
    async with echo_runtime(tmp_path / "m.db", tracing=tracing) as rt, browser(rt) as client:
        run = await rt.send("t", "hello")
        page = await client.get(f"/runs/{run.id}")
    trace_id = run.trace.split("-")[1]
    assert f'href="https://tempo.example/trace/{trace_id}"' in page.text
    tracing.close()


async def test_an_untraced_run_page_has_no_trace_link(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, browser(rt) as client:
        run = await rt.send("t", "hello")
        page = await client.get(f"/runs/{run.id}")
    assert 'id="run-trace"' not in page.text
