"""Pure pieces of `maiden run` and its HTTP API: loopback, the token rule, log formats."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from bot.config import LoadedConfig, parse_config
from bot.logging import JsonFormatter, Redactor, RunContext, TextFormatter
from channels.http import is_loopback
from runtime import ConfigError


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
    ("192.168.1.20", False), ("example.com", False), ("", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def loaded(toml: str) -> LoadedConfig:
    return LoadedConfig(parse_config(toml), Path("/srv/agent.toml"), exists=True)


def http_token(config: LoadedConfig) -> str | None:
    return config.config.http.token()


def test_a_token_is_needed_beyond_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("T_ENV", raising=False)
    assert http_token(loaded("")) is None
    assert http_token(loaded("[http]\ntoken_env = 'T_ENV'\n")) is None  # loopback: fine
    with pytest.raises(ConfigError, match=r"'0.0.0.0' is not a loopback address and no \[http\] "
                                          "token_env"):
        http_token(loaded("[http]\nhost = '0.0.0.0'\n"))
    with pytest.raises(ConfigError, match=r"\$T_ENV is not set"):
        http_token(loaded("[http]\nhost = '0.0.0.0'\ntoken_env = 'T_ENV'\n"))
    monkeypatch.setenv("T_ENV", "a-long-random-token")
    assert http_token(loaded("[http]\nhost = '0.0.0.0'\ntoken_env = 'T_ENV'\n")) \
        == "a-long-random-token"


def test_http_config_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"http\.max_body_bytes"):
        parse_config("[http]\nmax_body_bytes = 10\n")
    with pytest.raises(ConfigError, match=r"http\.bogus: unknown key"):
        parse_config("[http]\nbogus = 1\n")


def record(message: str, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("maiden.test", logging.INFO, __file__, 1, message, None, None)
    rec.__dict__.update(extra)
    return rec


def test_json_lines_carry_the_run_and_never_a_secret() -> None:
    fmt = JsonFormatter(Redactor(["sk-secret-value", "abc"]))
    rec = record("calling with sk-secret-value and abc", thread_id="t/1", run_id="r1",
                 tokens=12)
    RunContext().filter(rec)
    out = json.loads(fmt.format(rec))
    assert out["message"] == "calling with [redacted] and abc"  # 3 chars: not a secret
    assert out["thread_id"] == "t/1" and out["run_id"] == "r1" and out["tokens"] == 12
    assert out["level"] == "info" and out["logger"] == "maiden.test" and out["ts"]
    try:
        raise ValueError("boom sk-secret-value")
    except ValueError:
        failing = record("failed")
        failing.exc_info = sys.exc_info()
    assert "[redacted]" in json.loads(fmt.format(failing))["exc"]


async def test_records_from_a_runs_task_get_its_ids() -> None:
    context = RunContext()
    context.remember("r9", "thread 9")
    text = TextFormatter(Redactor([]))

    async def logged() -> logging.LogRecord:
        rec = record("inside")
        context.filter(rec)
        return rec

    in_run = await asyncio.create_task(logged(), name="maiden-run:r9")
    assert text.format(in_run).endswith("maiden.test [thread='thread 9' run=r9]: inside")
    in_worker = await asyncio.create_task(logged(), name="maiden-thread:t2")
    assert (vars(in_worker)["thread_id"], vars(in_worker)["run_id"]) == ("t2", None)
    elsewhere = record("outside")
    context.filter(elsewhere)
    assert text.format(elsewhere).endswith("maiden.test: outside")
