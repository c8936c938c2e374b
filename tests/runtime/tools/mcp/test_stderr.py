"""A stdio MCP server's stderr (runtime/tools/mcp/stderr.py), from a real process: each line
logged, the last few kept to say why it stopped (blank lines skipped, long ones cut, a last
line without its newline kept)."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from runtime.tools.mcp.stderr import StderrLog


async def _run_with(log: StderrLog, script: str) -> None:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                   stderr=log.writer)
    log.spawned()
    async with asyncio.timeout(10):
        await process.wait()


async def test_a_dead_servers_last_words_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    script = ("import sys\n"
              "for n in range(30): print(f'line {n}', file=sys.stderr)\n"
              "print('', file=sys.stderr)\n"
              "sys.stderr.write('x' * 500 + '\\nno newline at the end')\n")
    with caplog.at_level(logging.DEBUG, logger="maiden.mcp.srv"):
        async with StderrLog("srv") as log:
            await _run_with(log, script)
            async with asyncio.timeout(10):
                said = await log.tail(wait_s=10)
    assert said == f"line 29 | {'x' * 300} | no newline at the end"
    assert len(log.lines) == 20 and log.lines[0] == "line 12"  # the last twenty kept
    logged = [r.getMessage() for r in caplog.records if r.name == "maiden.mcp.srv"]
    assert logged[:2] == ["line 0", "line 1"] and logged[-1] == "no newline at the end"
    assert "" not in logged


async def test_a_server_never_spawned_has_nothing_to_say() -> None:
    async with StderrLog("never") as log:
        async with asyncio.timeout(10):
            assert await log.tail(wait_s=60) == ""  # at once: nothing will come


async def test_a_silent_server_says_nothing() -> None:
    async with StderrLog("quiet") as log:
        await _run_with(log, "pass")
        async with asyncio.timeout(10):
            assert await log.tail(wait_s=10) == ""
