"""Several agents from the command line: `maiden check` prints the agents, their tools with
effect classes and the routes, and warns when a route change would move a thread;
`maiden send` is answered by the thread's agent; `maiden usage --by agent` adds up by
agent."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.processes.test_cli import maiden

TWO = """
[tools]
builtins = ["clock", "shell"]

[[agents]]
name = "support"
system_prompt = "support"
builtins = ["clock"]
description = "answers #support, read-only"

[[agents]]
name = "eng"
max_turns = 20

[[routes]]
thread_prefix = "eng-"
agent = "eng"

[[budgets]]
scope = "user"
cost_usd = 2.5
"""


def test_check_send_and_usage_with_two_agents(shared_tmp: Path) -> None:
    (shared_tmp / "agent.toml").write_text(textwrap.dedent(TWO))
    checked = maiden(shared_tmp, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = checked.stdout
    assert "  agents    2: support (default), eng\n" in out
    assert "    support: echo, max_turns=12; tools clock (read_only)\n" in out
    assert "      answers #support, read-only\n" in out
    assert "    eng: echo, max_turns=20; tools clock (read_only), shell (non_idempotent, asks)" \
        in out
    assert "  routes    thread_prefix eng- -> eng; everything else -> support\n" in out
    assert "  caps      $2.5 per day for each user\n" in out
    assert "WARNING" not in out

    for thread in ("eng-1", "help-1"):
        sent = maiden(shared_tmp, "send", thread, "hi")
        assert sent.returncode == 0 and sent.stdout == "echo: hi\n", sent.stderr
    usage = maiden(shared_tmp, "usage", "--by", "agent")
    assert usage.returncode == 0, usage.stderr
    rows = [line.split()[:2] for line in usage.stdout.splitlines()[1:-1]]
    assert sorted(rows) == [["eng", "1"], ["support", "1"]]

    # eng- threads now go to support: the thread begun with eng stays with it, and check
    # says so.
    (shared_tmp / "agent.toml").write_text(textwrap.dedent(TWO).replace('agent = "eng"',
                                                                      'agent = "support"'))
    moved = maiden(shared_tmp, "check")
    assert moved.returncode == 0
    assert ("  WARNING   thread eng-1 is with eng; the routes now send its place to support "
            "(it stays with eng: only new threads follow the routes)") in moved.stdout
    assert maiden(shared_tmp, "send", "eng-1", "again").returncode == 0
    usage = maiden(shared_tmp, "usage", "--by", "agent")
    assert ["eng", "2"] in [line.split()[:2] for line in usage.stdout.splitlines()]


def test_a_route_to_an_unknown_agent_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(textwrap.dedent(TWO) + '\n[[routes]]\nagent = "ops"\n')
    checked = maiden(tmp_path, "check")
    assert checked.returncode == 2
    assert "agent.toml: routes.1.agent: no agent is called 'ops' (the agents: support, eng)" \
        in checked.stderr
