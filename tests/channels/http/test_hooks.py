"""Jobs started by a webhook (``[[hooks]]``, ``POST /v1/hooks/{name}``): a signed delivery
starts one run, its payload's fields in the prompt; the same delivery sent again runs
nothing more; a bad or missing signature is 401 and a body over the limit 413, nothing run;
no bearer token is asked for, the Host check stays."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import ConfigError, HookRefused, Origin, Runtime, SQLiteStore, ToolContext, tool
from schedules import ScheduleBook, Scheduler
from schedules.hooks import Hook, HookConfig, load_hooks, prompt_for, verify
from tests.http_helpers import echo_runtime, served

SECRET = "It's a Secret to Everybody"
PUSH = {"ref": "refs/heads/main", "repository": {"full_name": "octo/hello"},
        "commits": [{"message": "fix the deploy"}], "pusher": {"name": "ana"}}


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_githubs_example_signature_is_taken_and_a_changed_body_refused() -> None:
    # docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries gives, as its
    # example, the secret "It's a Secret to Everybody" over "Hello, World!" (the value
    # below: HMAC-SHA256 of them).
    gh = Hook(HookConfig(name="gh", secret_env="GH_SECRET", prompt="p"),
              b"It's a Secret to Everybody", Origin(channel="schedule"))
    header = {"x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c"
                                     "46f4379c8b043e17"}
    verify(gh, b"Hello, World!", header)  # taken: nothing raised (the header's case aside)
    with pytest.raises(HookRefused):
        verify(gh, b"Hello, World?", header)


def test_the_prompt_takes_the_payloads_fields() -> None:
    template = "{pusher.name} pushed to {repository.full_name} ({ref}): " \
               "{commits.0.message}{missing.field}"
    assert prompt_for(template, PUSH) == \
        "ana pushed to octo/hello (refs/heads/main): fix the deploy"
    assert json.loads(prompt_for("{payload}", PUSH)) == PUSH
    assert prompt_for("{repository}", PUSH) == '{"full_name": "octo/hello"}'
    # Only the payload's fields: nothing of Python reached through a value.
    assert prompt_for("{ref.__class__}", PUSH) == ""


def test_a_hook_whose_secret_is_not_set_or_whose_prompt_is_broken_names_the_key() -> None:
    hooks = [HookConfig(name="gh", secret_env="GH_SECRET", prompt="push {ref"),
             HookConfig(name="ci", secret_env="CI_SECRET", prompt="ok", deliver="slack:C1")]
    with pytest.raises(ConfigError) as caught:
        load_hooks(hooks, env={}, channels=[])
    keys = [key for key, _ in caught.value.problems]
    assert keys == ["hooks.0 (gh).secret_env", "hooks.0 (gh).prompt",
                    "hooks.1 (ci).secret_env", "hooks.1 (ci).deliver"]


@tool(effect="idempotent_write")
def label(ctx: ToolContext, repo: str, names: list[str]) -> str:
    """Label the repository's newest pull request."""
    LABELLED.append((ctx.idempotency_key, repo, tuple(names)))
    return f"{repo}: labelled {', '.join(names)}"


LABELLED: list[tuple[str, str, tuple[str, ...]]] = []


def test_a_hook_runs_a_prompt_or_a_tool() -> None:
    with pytest.raises(ValueError, match="one of prompt"):
        HookConfig(name="gh", secret_env="S")
    with pytest.raises(ValueError, match="one of prompt"):
        HookConfig(name="gh", secret_env="S", prompt="p", tool="t")
    with pytest.raises(ValueError, match="go with tool"):
        HookConfig(name="gh", secret_env="S", prompt="p", args={"a": 1})
    broken = HookConfig(name="gh", secret_env="S", tool="t", args={"repo": "{repo"})
    with pytest.raises(ConfigError) as caught:
        load_hooks([broken], env={"S": "x"}, channels=[])
    assert [key for key, _ in caught.value.problems] == ["hooks.0 (gh).args.repo"]


@asynccontextmanager
async def hooked(tmp_path: Path, **config: Any
                 ) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    db = tmp_path / "m.db"
    if "tool" not in config:
        config["prompt"] = "{pusher.name} pushed {commits.0.message!r} to " \
            "{repository.full_name}"
    hook = HookConfig(name="github", secret_env="GH_SECRET", **config)
    async with echo_runtime(db, [label]) as rt, SQLiteStore(db) as store:
        book = ScheduleBook(store, hooks=load_hooks([hook], env={"GH_SECRET": SECRET},
                                                    channels=[]))
        async with Scheduler(book, rt, timers=False) as scheduler, \
                served(rt, token="t-api", schedules=scheduler) as (client, _):
            client.headers.pop("Authorization")  # a sender has no bearer token
            yield client, rt


async def test_a_signed_delivery_starts_one_run_and_again_runs_nothing(tmp_path: Path) -> None:
    body = json.dumps(PUSH).encode()
    headers = {"X-Hub-Signature-256": signed(body), "X-GitHub-Delivery": "d-1",
               "X-GitHub-Event": "push", "Content-Type": "application/json"}
    async with hooked(tmp_path) as (client, rt):
        first = await client.post("/v1/hooks/github", content=body, headers=headers)
        assert first.status_code == 202, first.text
        took = first.json()
        again = await client.post("/v1/hooks/github", content=body, headers=headers)
        assert again.status_code == 200 and again.json() == {**took, "again": True,
                                                              "state": again.json()["state"]}
        done = await rt.wait(took["run_id"])
        other = await client.post("/v1/hooks/github", content=body,
                                  headers={**headers, "X-GitHub-Delivery": "d-2"})
        assert other.status_code == 202 and other.json()["run_id"] != took["run_id"]
        runs = await rt.records.runs()
    assert took["again"] is False and took["thread_id"].startswith("hook:github:")
    assert done.text == "ana pushed 'fix the deploy' to octo/hello"
    assert done.reply == f"echo: {done.text}"
    assert len(runs) == 2


async def test_a_form_encoded_delivery_without_an_id_is_keyed_by_its_body(
        tmp_path: Path) -> None:
    # GitHub's other content type, "application/x-www-form-urlencoded": payload=<JSON>.
    form = str(httpx.QueryParams({"payload": json.dumps(PUSH)})).encode()
    headers = {"X-Hub-Signature-256": signed(form),
               "Content-Type": "application/x-www-form-urlencoded"}
    async with hooked(tmp_path) as (client, rt):
        first = await client.post("/v1/hooks/github", content=form, headers=headers)
        again = await client.post("/v1/hooks/github", content=form, headers=headers)
        done = await rt.wait(first.json()["run_id"])
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["run_id"] == first.json()["run_id"]
    assert done.text == "ana pushed 'fix the deploy' to octo/hello"


@pytest.mark.parametrize("signature", [None, "", "sha256=00", "sha1=abc", "sha256=" + "0" * 64,
                                       "wrong-secret"])
async def test_no_valid_signature_is_401_and_runs_nothing(tmp_path: Path,
                                                          signature: str | None) -> None:
    body = json.dumps(PUSH).encode()
    headers = {"X-GitHub-Delivery": "d-1", "Content-Type": "application/json"}
    if signature == "wrong-secret":
        headers["X-Hub-Signature-256"] = signed(body, "another secret")
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    async with hooked(tmp_path) as (client, rt):
        refused = await client.post("/v1/hooks/github", content=body, headers=headers)
        tampered = await client.post("/v1/hooks/github", content=body + b" ",
                                     headers={**headers, "X-Hub-Signature-256": signed(body)})
        assert await rt.records.runs() == []
    assert refused.status_code == tampered.status_code == 401
    assert refused.json()["code"] == "bad_signature"
    assert "X-Hub-Signature-256" in refused.json()["detail"]


async def test_a_body_over_the_limit_is_413_and_an_unknown_hook_404(tmp_path: Path) -> None:
    body = json.dumps({**PUSH, "padding": "x" * 2000}).encode()
    headers = {"X-Hub-Signature-256": signed(body), "Content-Type": "application/json"}
    async with hooked(tmp_path, max_body_bytes=1000) as (client, rt):
        big = await client.post("/v1/hooks/github", content=body, headers=headers)
        unknown = await client.post("/v1/hooks/gitlab", content=body, headers=headers)
        foreign = await client.post("/v1/hooks/github", content=body,
                                    headers={**headers, "Host": "evil.example"})
        assert await rt.records.runs() == []
    assert (big.status_code, unknown.status_code, foreign.status_code) == (413, 404, 400)
    assert big.json()["code"] == "too_large"


async def test_the_header_names_are_the_hooks_to_choose(tmp_path: Path) -> None:
    body = b'{"pusher": {"name": "cy"}}'
    headers = {"X-Signature": signed(body), "X-Delivery": "7"}
    async with hooked(tmp_path, signature_header="X-Signature",
                      delivery_header="X-Delivery", thread="hooks:ci") as (client, rt):
        first = await client.post("/v1/hooks/github", content=body, headers=headers)
        again = await client.post("/v1/hooks/github", content=body, headers=headers)
        await rt.wait(first.json()["run_id"])
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["thread_id"] == "hooks:ci"


async def test_a_hook_naming_a_tool_runs_it_once_with_the_payloads_fields(
        tmp_path: Path) -> None:
    LABELLED.clear()
    body = json.dumps(PUSH).encode()
    headers = {"X-Hub-Signature-256": signed(body), "X-GitHub-Delivery": "d-9",
               "Content-Type": "application/json"}
    async with hooked(tmp_path, tool="label", args={
            "repo": "{repository.full_name}", "names": ["pushed-by-{pusher.name}", "ci"]}
                      ) as (client, rt):
        took = (await client.post("/v1/hooks/github", content=body, headers=headers)).json()
        done = await rt.wait(took["run_id"])
        again = await client.post("/v1/hooks/github", content=body, headers=headers)
        assert again.status_code == 200
        await rt.idle()
    assert done.state == "completed" and done.reply == "octo/hello: labelled pushed-by-ana, ci"
    assert done.usage.input_tokens == 0  # no model asked
    assert [(repo, names) for _, repo, names in LABELLED] == [
        ("octo/hello", ("pushed-by-ana", "ci"))]
