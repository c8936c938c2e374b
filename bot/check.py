"""`maiden check`: validate the config and say what is configured, without serving.

Each part gets a line (or a few): the agent, the provider, the store (PostgreSQL is
reached and migrated), the tools with their effect classes, who may do what on each
channel (Slack and Discord tokens are verified), each MCP server started and its tools
listed, where traces go (the collector is asked), the schedules, each knowledge source's
folder (there or not), and which secret variables are unset.

The ``[tools] modules`` are imported in a child process first: a module that ends the
process while it is imported (``os._exit``, a crash in native code) would otherwise end
`maiden check` with it, with exit status 0 and nothing said.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from runtime import (
    Agents,
    CapConfig,
    ConfigError,
    MaidenError,
    ToolRegistry,
    describe_isolation,
    describe_store,
    folder_of,
    make_store,
    probe_collector,
    store_versions,
)
from schedules import At, Schedule

from .agents import agent_lines, make_agents, moved_threads
from .config import LoadedConfig, env_status
from .jobs import chat_schedule_tools
from .rights import rights_lines

__all__ = ["check", "import_apart"]

EXIT_OK, EXIT_FAILED = 0, 1


def check(loaded: LoadedConfig) -> int:
    """Print what the config sets up; the exit status (0: all is well, 1: something will
    not work as configured). ``ConfigError`` for an invalid config."""
    from runtime import make_tools

    cfg = loaded.config
    import_apart(cfg.tools.modules, loaded.base_dir)
    tools = make_tools(cfg.tools, loaded.base_dir)
    for made in chat_schedule_tools(loaded):
        tools.add(made)
    agents = asyncio.run(_agents(loaded, tools))
    print(f"{loaded.path}: {'ok' if loaded.exists else 'not found, using defaults'}")
    _print_agents(loaded, agents)
    print(f"  store     {describe_store(cfg.store, loaded.base_dir)}")
    store_failed = _check_store(loaded)
    if len(agents) > 1:
        _warn_moved(loaded, agents)
    print(f"  runtime   concurrency={cfg.runtime.concurrency}")
    _print_tools(loaded, tools)
    _print_http(loaded)
    failed = store_failed | _check_slack(loaded) | _check_discord(loaded)
    for line in rights_lines(cfg, 9):
        print(line)
    failed |= _check_mcp(loaded)
    failed |= _check_otel(loaded)
    _print_schedules(loaded)
    _print_knowledge(loaded)
    missing = [var for var, ok in env_status(cfg).items() if not ok]
    for var, ok in env_status(cfg).items():
        print(f"  secret    ${var}: {'set' if ok else 'NOT SET'}")
    return EXIT_FAILED if missing or failed else EXIT_OK


def _print_agents(loaded: LoadedConfig, agents: Agents) -> None:
    """The agent and its provider (or each agent and the routes), and the spend caps."""
    cfg = loaded.config
    if not cfg.agents:
        print(f"  agent     {cfg.agent.name!r}, max_turns={cfg.agent.max_turns}, "
              f"max_tool_calls_per_turn={cfg.agent.max_tool_calls_per_turn}, "
              f"repeat_limit={cfg.agent.repeat_limit}")
        print(f"  provider  {cfg.provider.kind}" + (f", model {cfg.provider.model}"
                                                   if cfg.provider.model else ""))
    if cfg.agents or cfg.routes:
        for line in agent_lines(cfg, agents):
            print(line)
    if cfg.budgets:
        print("  caps      " + "; ".join(_cap_line(c) for c in cfg.budgets))


def _print_tools(loaded: LoadedConfig, tools: ToolRegistry) -> None:
    """The tools with their effect classes, the shell's isolation, the tools that ask for
    approval (and who decides), and the budget's limits."""
    cfg = loaded.config
    print(f"  tools     {', '.join(f'{t.name} ({t.effect})' for t in tools) or 'none'}")
    shell = "shell" in cfg.tools.builtins
    print("  isolation " + (describe_isolation(cfg.tools.shell.sandbox, cfg.tools.shell.run_as)
                             if shell else "no shell tool"))
    asks = [t.name for t in tools if t.requires_approval]
    if asks:
        who = ", ".join(cfg.agent.approvers) or "anyone who can reach maiden"
        print(f"  approval  {', '.join(asks)} (decided by {who})")
    limits = {k: v for k, v in cfg.budget.model_dump().items()
              if k.startswith("max_") and v is not None}
    print("  budget    " + (", ".join(f"{k}={v:g}" for k, v in limits.items()) or "no limits"))


def _print_http(loaded: LoadedConfig) -> None:
    """Where the HTTP API listens, and who may call it."""
    http = loaded.config.http
    if not http.enabled:
        print("  http      disabled")
        return
    named = [f"{t.name} (${t.token_env}: {', '.join(t.rights)})" for t in http.tokens]
    if http.token_env:
        named.append(f"operator (${http.token_env}: every right)")
    print(f"  http      {http.host}:{http.port}, "
          + (f"tokens {', '.join(named)}" if named else "no token: loopback only, "
             "every caller is 'local'")
          + (f"; also answers as {', '.join(http.allowed_hosts)}"
             if http.allowed_hosts else "")
          + f"; max {http.max_connections} connections, headers within "
            f"{http.header_timeout_s:g} s")


def _print_schedules(loaded: LoadedConfig) -> None:
    """The schedules in the config (the first five), and how many chat may add."""
    cfg = loaded.config
    defined = cfg.read_schedules()
    chat = cfg.schedules_limits.max_per_thread
    print(f"  schedules {len(defined)} in the config"
          + "".join(f"; {s.name} {_when(s)}" for s in defined[:5])
          + ("; ..." if len(defined) > 5 else "")
          + (f"; from chat: up to {chat} per conversation (schedule_* tools)" if chat
             else "; none from chat ([schedules_limits] max_per_thread = 0)"))


def _print_knowledge(loaded: LoadedConfig) -> None:
    """Each ``[[knowledge]]`` source: its folder and whether it is there (a missing one is
    no error: it may be mounted later; the indexing pass says so too), and the places
    whose shared files it takes."""
    for source in loaded.config.knowledge:
        folder = folder_of(source, loaded.base_dir)
        state = "" if folder is None else f"{folder} " + (
            "found" if folder.is_dir() else "NOT FOUND (indexed once it is there)")
        shared = ("files shared in " + ", ".join(source.shared_in)) if source.shared_in \
            else ""
        what = "; ".join(part for part in (state, shared) if part)
        who = ", ".join(source.agents) or "every agent"
        where = ", ".join(source.searched_in) or "everywhere"
        print(f"  knowledge {source.name}: {what}; for {who}, {where}")


def _when(schedule: Schedule) -> str:
    """A schedule's times as the check lists them: its crontab, or its one time."""
    if isinstance(schedule.cron, At):
        return f"once at {schedule.cron.moment.isoformat()}"
    return f"{schedule.config.cron!r} {schedule.cron.timezone}"


async def _agents(loaded: LoadedConfig, tools: ToolRegistry) -> Agents:
    """The agents, their providers made (a missing key is a ``ConfigError``) and closed."""
    async with AsyncExitStack() as stack:
        return make_agents(loaded.config, loaded.base_dir, tools, stack)


def _cap_line(cap: CapConfig) -> str:
    limits = [f"{cap.tokens:,} tokens" if cap.tokens else "",
              f"${cap.cost_usd:g}" if cap.cost_usd else ""]
    whose = cap.user or cap.place or cap.agent or f"each {cap.scope}"
    return f"{' and '.join(x for x in limits if x)} per {cap.period} for {whose}"


def _warn_moved(loaded: LoadedConfig, agents: Agents) -> None:
    """Warn of threads the routes would now send to another agent (they stay with theirs).
    Only a store that already exists is read."""
    cfg = loaded.config.store
    if cfg.kind != "postgres" and not (loaded.base_dir / cfg.path).exists():
        return

    async def read() -> list[tuple[str, str, str]]:
        store = make_store(cfg, loaded.base_dir)
        await store.open()
        try:
            return await moved_threads(store, agents)
        finally:
            await store.close()

    try:
        moved = asyncio.run(read())
    except (MaidenError, OSError) as exc:
        print(f"  routes    could not read the threads to compare: {exc}")
        return
    for thread, own, now in moved[:5]:
        print(f"  WARNING   thread {thread} is with {own}; the routes now send its place to "
              f"{now} (it stays with {own}: only new threads follow the routes)")
    if len(moved) > 5:
        print(f"  WARNING   ... and {len(moved) - 5} more threads like it")


def _check_otel(loaded: LoadedConfig) -> bool:
    """Where traces go, and whether the collector takes them; True if it does not."""
    otel = loaded.config.otel
    if not otel.endpoint:
        print("  traces    off (no [otel] endpoint)")
        return False
    print(f"  traces    OTLP/HTTP to {otel.traces_url()}, service {otel.service_name!r}, "
          f"sampling {otel.sample_ratio:g}"
          + (", with content (capture_content)" if otel.capture_content else ""))
    try:
        ok, said = asyncio.run(probe_collector(otel))
    except ConfigError:
        return True  # its unset variable is listed with the secrets
    print(f"            {said}")
    return not ok


def _check_store(loaded: LoadedConfig) -> bool:
    """For PostgreSQL: connect, migrate if needed, print the server's and the schema's
    versions; True if it cannot be reached."""
    cfg = loaded.config.store
    if cfg.kind != "postgres":
        return False
    try:
        found = asyncio.run(store_versions(cfg, loaded.base_dir))
    except ConfigError as exc:
        print(f"            {exc.problems[0][1]}")
        return True
    except MaidenError as exc:
        print(f"            FAILED to connect: {exc}")
        return True
    if found is not None:
        server, schema = found
        print(f"            {server}; maiden schema version {schema}")
    return False


def _check_mcp(loaded: LoadedConfig) -> bool:
    """Start each MCP server, list its tools with their effect classes, stop it; True if
    one failed to start."""
    servers = loaded.config.mcp_servers
    if not servers:
        print("  mcp       not configured")
        return False
    from runtime.tools.mcp import check_servers  # the MCP SDK loads only here

    failed = False
    for report in asyncio.run(check_servers(servers, loaded.base_dir)):
        where = f"{report.config.name} ({report.config.describe()})"
        if report.problem is not None:
            failed = True
            print(f"  mcp       {where}: FAILED to start: {report.problem}")
            continue
        count = len(report.tools)
        print(f"  mcp       {where}: {count} tool{'' if count == 1 else 's'}")
        for t in report.tools:
            print(f"            {t.name} ({t.effect}"
                  + (", asks approval)" if t.requires_approval else ")"))
        for note in report.notes:
            print(f"            note: {note}")
    return failed


def _check_discord(loaded: LoadedConfig) -> bool:
    """Print what Discord is configured to do and whether its token works; True if not."""
    discord = loaded.config.channels.discord
    if discord is None or not discord.enabled:
        return _verify("discord", None, None)
    from channels.discord.check import check_discord

    about = (f"api {discord.api_url}, respond_in {discord.respond_in}, "
             f"{discord.access.summary()}")
    return _verify("discord", about, lambda: check_discord(discord, discord.token()))


def _check_slack(loaded: LoadedConfig) -> bool:
    """Print what Slack is configured to do and whether its token works; True if not."""
    slack = loaded.config.channels.slack
    if slack is None or not slack.enabled:
        return _verify("slack", None, None)
    from channels.slack.check import check_slack

    about = f"mode {slack.mode}, api {slack.api_url}, {slack.access.summary()}"
    # The bot token alone: auth.test needs nothing else, and a mode's other secret, if
    # unset, is listed with the secrets (and fails the check) anyway.
    return _verify("slack", about, lambda: check_slack(slack, slack.bot_token()))


def _verify(
    name: str, about: str | None,
    probe: Callable[[], Coroutine[Any, Any, tuple[bool, list[str]]]] | None,
) -> bool:
    """One channel's lines in `maiden check`; True if it will not work as configured."""
    if about is None or probe is None:
        print(f"  {name:<9} not configured")
        return False
    print(f"  {name:<9} {about}")
    try:
        ok, lines = asyncio.run(probe())
    except ConfigError:
        return True  # its unset variables are listed with the secrets
    for line in lines:
        print(f"            {line}")
    return not ok


_DONE = "maiden: import finished"
_IMPORT = """
import importlib, json, sys
sys.path[:] = json.loads(sys.argv[1])
try:
    importlib.import_module(sys.argv[2])
except BaseException:
    pass  # an ordinary failure is reported by the import in `maiden check` itself
print(sys.argv[3], flush=True)
"""


def import_apart(modules: Sequence[str], base_dir: Path) -> None:
    """Import each tools module in a child process; ``ConfigError`` naming the first that
    ends the process before its import finishes (it would end this one too)."""
    path = json.dumps([str(base_dir), *sys.path])
    for name in modules:
        done = subprocess.run([sys.executable, "-c", _IMPORT, path, name, _DONE],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", cwd=base_dir)
        if _DONE in done.stdout.splitlines():
            continue
        if done.returncode < 0:
            how = f"was killed by {signal.Signals(-done.returncode).name}"
        else:
            how = f"exited with status {done.returncode}"
        raise ConfigError([("tools.modules", f"importing {name!r} ended the process (it {how} "
                            "before the import finished): a tools module must not exit or "
                            "crash while it is imported")])
