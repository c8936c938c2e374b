"""Trust at the HTTP door: every request must name this server (Host), no other origin may
change anything (Origin), and who a caller is comes from its token, never from its body."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runtime import RunState, tool
from tests.http_helpers import banner_url, echo_runtime, served, thread_url, tokens

ROOT = Path(__file__).resolve().parents[3]
PROBLEM = "application/problem+json"


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


async def test_a_host_that_does_not_name_this_server_is_refused_before_any_handler(
        tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, served(rt) as (client, _):
        port = httpx.URL(str(client.base_url)).port
        assert port is not None
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}",
                     "127.0.0.1", f"localhost.evil.example:{port}", f"bob@127.0.0.1:{port}",
                     f"127.0.0.1:{port}/x", "[::2]:1", ""):
            refused = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                        headers={"Host": host})
            assert refused.status_code == 400, (host, refused.text)
            assert refused.headers["content-type"] == PROBLEM
            assert refused.json()["code"] == "invalid_host"
            page = await client.get("/", headers={"Host": host})
            assert page.status_code == 400, host
        assert not await rt.records.runs()
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}",
                     f"[::1]:{port}"):
            fine = await client.get("/v1/threads", headers={"Host": host})
            assert fine.status_code == 200, (host, fine.text)


async def test_allowed_hosts_are_the_names_behind_a_proxy(tmp_path: Path) -> None:
    allowed = ["maiden.example.com", "*.corp.example", "ops.example:8443"]
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, allowed_hosts=allowed) as (client, _):
        for host, status in [("maiden.example.com", 200), ("maiden.example.com:443", 200),
                             ("a.corp.example", 200), ("corp.example", 400),
                             ("ops.example:8443", 200), ("ops.example", 400),
                             ("evil.example", 400)]:
            answer = await client.get("/healthz", headers={"Host": host})
            assert answer.status_code == status, (host, answer.text)


async def test_a_foreign_origin_may_not_change_anything(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, served(rt) as (client, _):
        own = str(client.base_url).rstrip("/")
        for origin in ("http://evil.example", "null", own.replace("127.0.0.1", "localhost"),
                       own + "0", "https://127.0.0.1"):
            refused = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                        headers={"Origin": origin})
            assert refused.status_code == 403, (origin, refused.text)
            assert refused.json()["code"] == "foreign_origin"
            console = await client.post("/console/send", headers={"Origin": origin},
                                        data={"thread": "t", "text": "hi"})
            assert console.status_code == 403, origin
        assert not await rt.records.runs()
        # Reading is not changing: a page of another origin cannot read the answer anyway.
        assert (await client.get("/v1/threads", headers={"Origin": "http://evil.example"})
                ).status_code == 200
        same = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                 headers={"Origin": own})
        assert same.status_code == 200, same.text
        assert "access-control-allow-origin" not in same.headers  # CORS is off


async def test_behind_a_tls_proxy_the_browsers_own_origin_may_post(tmp_path: Path) -> None:
    # The proxy passes the browser's Host on and forwards plain http: the Origin says https
    # with no port, the Host no port, and they are the same origin.
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, allowed_hosts=["maiden.example.com"]) as (client, _):
        for host, origin, status in [
                ("maiden.example.com", "https://maiden.example.com", 200),
                ("maiden.example.com", "http://maiden.example.com", 200),
                ("maiden.example.com:8443", "https://maiden.example.com:8443", 200),
                ("maiden.example.com", "https://maiden.example.com:8443", 403),
                ("maiden.example.com:443", "https://maiden.example.com", 200),
                ("maiden.example.com", "https://evil.example.com", 403)]:
            sent = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                     headers={"Host": host, "Origin": origin})
            assert sent.status_code == status, (host, origin, sent.text)


async def test_cors_origins_are_let_in_and_told_so(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt, \
            served(rt, cors_origins=["https://app.example"]) as (client, _):
        headers = {"Origin": "https://app.example"}
        sent = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                 headers=headers)
        assert sent.status_code == 200, sent.text
        assert sent.headers["access-control-allow-origin"] == "https://app.example"
        other = await client.post(thread_url("t", "/messages"), json={"text": "hi"},
                                  headers={"Origin": "https://other.example"})
        assert other.status_code == 403


async def test_the_identity_is_the_tokens_name_and_rights_are_per_token(
        tmp_path: Path) -> None:
    # Carol approves in the threads named ops* (besides her own): bob's "ops" is one.
    named = tokens(("alice", "t-alice"), ("bob", "t-bob", ["talk"]),
                   ("carol", "t-carol", ["approve"], ["ops*"]))
    bob = {"Authorization": "Bearer t-bob"}
    carol = {"Authorization": "Bearer t-carol"}
    async with echo_runtime(tmp_path / "m.db", [deploy]) as rt, \
            served(rt, credentials=named) as (client, _):
        assert (await client.get("/v1/threads", headers={"Authorization": "Bearer nope"})
                ).status_code == 401
        paused = await client.post(thread_url("ops", "/messages"),
                                   json={"text": '/tool deploy {"service": "api"}'},
                                   headers=bob)
        assert paused.status_code == 200, paused.text
        run = paused.json()
        run_id, call = run["run_id"], run["approval"]["tool_call_id"]
        assert (await rt.records.get_run(run_id)).origin.user == "bob"
        posing = await client.post(thread_url("ops", "/messages"),
                                   json={"text": "hi", "user": "alice"}, headers=bob)
        assert posing.status_code == 403 and posing.json()["code"] == "identity_mismatch"
        decide = f"/v1/runs/{run_id}/approvals/{call}"
        no_right = await client.post(decide, json={"approve": True}, headers=bob)
        assert no_right.status_code == 403 and no_right.json()["code"] == "forbidden"
        claimed = await client.post(decide, json={"approve": True, "by": "alice"},
                                    headers=carol)
        assert claimed.status_code == 403 and claimed.json()["code"] == "identity_mismatch"
        assert (await client.post(f"/v1/runs/{run_id}/cancel", headers=carol)
                ).json()["code"] == "forbidden"
        assert (await client.post(thread_url("x", "/messages"), json={"text": "hi"},
                                  headers=carol)).status_code == 403
        decided = await client.post(decide, json={"approve": True, "wait": True},
                                    headers=carol)
        assert decided.status_code == 200, decided.text
        done = await rt.records.get_run(run_id)
        assert done.state is RunState.COMPLETED and done.decisions[-1].by == "carol"


async def test_without_tokens_http_decisions_are_local_and_approvers_must_say_so(
        tmp_path: Path) -> None:
    cases: list[tuple[list[str], int]] = [(["alice"], 403), (["alice", "local"], 200), ([], 200)]
    for approvers, status in cases:
        async with echo_runtime(tmp_path / f"{len(approvers)}.db", [deploy],
                                approvers=approvers) as rt, served(rt) as (client, _):
            run = (await client.post(thread_url("ops", "/messages"),
                                     json={"text": '/tool deploy {"service": "api"}'})).json()
            decided = await client.post(
                f"/v1/runs/{run['run_id']}/approvals/{run['approval']['tool_call_id']}",
                json={"approve": True, "wait": True})
            assert decided.status_code == status, (approvers, decided.text)
            if status == 200:
                assert (await rt.records.get_run(run["run_id"])).decisions[-1].by == "local"
            posing = await client.post(
                f"/v1/runs/{run['run_id']}/approvals/{run['approval']['tool_call_id']}",
                json={"approve": True, "by": "alice"})
            assert posing.status_code == 403


def test_the_dns_rebinding_requests_do_not_reach_maiden_run(shared_tmp: Path) -> None:
    """The exact requests of the attack, against `maiden run` on the default config with the
    shell tool on: refused, and the command never runs."""
    shutil.copy(ROOT / "agent.toml", shared_tmp / "agent.toml")
    text = (shared_tmp / "agent.toml").read_text().replace(
        'builtins = ["clock"]', 'builtins = ["clock", "shell"]')
    (shared_tmp / "agent.toml").write_text(text + "\n[http]\nport = 0\n")
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=shared_tmp,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = banner_url(proc.stdout)
        assert url, "no http line in the banner"
        port = httpx.URL(url).port
        evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        with httpx.Client(base_url=url, timeout=20) as client:
            sent = client.post("/v1/threads/rb/messages", headers=evil, json={
                "text": '/tool shell {"command":"id > marker.txt"}'})
            assert sent.status_code == 400 and sent.json()["code"] == "invalid_host"
            approval = client.post("/v1/runs/x/approvals/y", headers=evil,
                                   json={"approve": True, "by": "evil"})
            assert approval.status_code == 400
            # The Host is right but the page is another origin's (a cross-site form).
            same_host = {"Origin": f"http://evil.example:{port}"}
            forged = client.post("/v1/threads/rb/messages", headers=same_host, json={
                "text": '/tool shell {"command":"id > marker.txt"}'})
            assert forged.status_code == 403
            assert client.get("/v1/runs").json()["runs"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert not (shared_tmp / "marker.txt").exists()


@pytest.mark.parametrize("entry", ["*x.example", "a b", "http://x", "x:99999", "u@x"])
def test_a_bad_allowed_host_names_the_key(entry: str) -> None:
    from pydantic import ValidationError

    from channels.http import HttpConfig

    with pytest.raises(ValidationError, match="allowed_hosts"):
        HttpConfig(allowed_hosts=[entry])
