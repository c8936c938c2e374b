"""`maiden check` on traces: where they go and whether the collector takes them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot.check import check
from bot.config import LoadedConfig, parse_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_check_says_traces_are_off_without_an_endpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loaded = LoadedConfig(parse_config(""), tmp_path / "agent.toml", exists=False)
    assert check(loaded) == 0
    assert "  traces    off (no [otel] endpoint)" in capsys.readouterr().out


def test_check_fails_when_the_collector_does_not_answer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    loaded = LoadedConfig(parse_config(f'[otel]\nendpoint = "{url}"\n'), tmp_path / "agent.toml",
                          exists=True)
    assert check(loaded) == 1
    out = capsys.readouterr().out
    assert f"  traces    OTLP/HTTP to {url}/v1/traces, service 'maiden', sampling 1" in out
    assert "does not answer" in out


def test_check_lists_a_one_shot_by_its_time(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    loaded = LoadedConfig(parse_config(
        '[[schedules]]\nname = "nudge"\nat = "2026-12-07T09:00:00-03:00"\nsay = "go"\n'
        '[[schedules]]\nname = "daily"\ncron = "0 9 * * *"\nprompt = "p"\n'),
        tmp_path / "agent.toml", exists=True)
    assert check(loaded) == 0
    assert "  schedules 2 in the config; nudge once at 2026-12-07T12:00:00+00:00; daily " \
        "'0 9 * * *' UTC;" in capsys.readouterr().out
