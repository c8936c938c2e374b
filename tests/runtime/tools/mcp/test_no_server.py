"""MCP without a server: the config keys, names, effect classes, results, backoff."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from bot.config import parse_config
from runtime import ConfigError, Tool, ToolContext, ToolImage
from runtime.tools.mcp import McpServerConfig, effect_from_hints, tool_name
from runtime.tools.mcp.listing import argument_check, build_tools
from runtime.tools.mcp.mapping import MAX_NAME, error_text, result_content, select_tools
from runtime.tools.mcp.server import backoff_delay

SERVER = '[[mcp_servers]]\nname = "srv"\ncommand = "python"\n'


# -- config -------------------------------------------------------------------------------


def test_a_full_entry_parses() -> None:
    cfg = parse_config(SERVER + 'args = ["server.py"]\nenv = { A = "1" }\nenv_from = ["TOK"]\n'
                       'tools = ["echo"]\neffects = { echo = "idempotent_write" }\n'
                       'approval = { echo = true }\ntimeout_s = 5\n'
                       '[[mcp_servers]]\nname = "web"\nurl = "https://mcp.example.com/mcp"\n'
                       'headers_env = { Authorization = "WEB_AUTH" }\n')
    stdio, http = cfg.mcp_servers
    assert stdio.transport == "stdio" and stdio.describe() == "stdio python server.py"
    assert stdio.effects == {"echo": "idempotent_write"} and stdio.timeout_s == 5
    assert http.transport == "http" and http.describe() == "http https://mcp.example.com/mcp"
    # Every variable they read is a secret: listed by `maiden check`, kept out of the logs.
    assert cfg.secret_envs() == {"mcp_servers.0.env_from.0": "TOK",
                                 "mcp_servers.1.headers_env.Authorization": "WEB_AUTH"}
    assert parse_config("").mcp_servers == []


@pytest.mark.parametrize(
    ("toml", "key", "reason"),
    [
        ('[[mcp_servers]]\nname = "srv"\n', "mcp_servers.0.command",
         "required: command (to start a stdio server) or url"),
        (SERVER + 'url = "http://x/mcp"\n', "mcp_servers.0.command", "not both"),
        ('[[mcp_servers]]\nname = "a b"\ncommand = "x"\n', "mcp_servers.0.name",
         "letters, digits"),
        ('[[mcp_servers]]\ncommand = "x"\n', "mcp_servers.0.name", "required key is missing"),
        ('[[mcp_servers]]\nname = "w"\nurl = "ftp://x"\n', "mcp_servers.0.url", "http://"),
        ('[[mcp_servers]]\nname = "w"\nurl = "http://x"\nargs = ["a"]\n', "mcp_servers.0.args",
         "only for a command (stdio) server"),
        (SERVER + 'headers_env = { X-Key = "K" }\n', "mcp_servers.0.headers_env",
         "only for a url (HTTP) server"),
        ('[[mcp_servers]]\nname = "w"\nurl = "http://x"\nheaders_env = { X-Key = "not a var" }\n',
         "mcp_servers.0.headers_env", "not an environment variable name"),
        (SERVER + 'env_from = ["A-B"]\n', "mcp_servers.0.env_from", "'A-B'"),
        (SERVER + 'effects = { echo = "harmless" }\n', "mcp_servers.0.effects.echo",
         "'read_only'"),
        (SERVER + "timeout_s = 0\n", "mcp_servers.0.timeout_s", "greater than 0"),
        (SERVER + "bogus = 1\n", "mcp_servers.0.bogus", "unknown key"),
        (SERVER + SERVER, "mcp_servers.1.name", "'srv' is already the name of mcp_servers.0"),
    ],
)
def test_config_errors_name_the_key(toml: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(toml, "agent.toml")
    assert key in [k for k, _ in info.value.problems], info.value.problems
    assert f"agent.toml: {key}: " in str(info.value) and reason in str(info.value)


# -- names and effects ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("srv", "echo", "srv__echo"),
        ("git-hub", "create_issue", "git-hub__create_issue"),
        ("fs", "files.read/all", "fs__files_read_all"),  # what providers accept
    ],
)
def test_tool_names(server: str, tool: str, expected: str) -> None:
    assert tool_name(server, tool) == expected


def test_long_tool_names_are_cut_and_stay_apart() -> None:
    a, b = tool_name("srv", "x" * 80 + "a"), tool_name("srv", "x" * 80 + "b")
    assert len(a) == len(b) == MAX_NAME and a != b


@pytest.mark.parametrize(
    ("read_only", "destructive", "idempotent", "effect"),
    [
        (True, None, None, "read_only"),
        (True, True, False, "read_only"),
        (None, False, True, "idempotent_write"),
        (False, False, True, "idempotent_write"),
        (None, None, True, "non_idempotent"),  # destructive by the spec's default
        (None, True, True, "non_idempotent"),
        (None, False, None, "non_idempotent"),
        (None, None, None, "non_idempotent"),
        (False, None, False, "non_idempotent"),
    ],
)
def test_effect_classes_from_annotations(
    read_only: bool | None, destructive: bool | None, idempotent: bool | None, effect: str
) -> None:
    assert effect_from_hints(read_only, destructive, idempotent) == effect


def test_allowlist_and_notes_on_unknown_tools() -> None:
    cfg = McpServerConfig(name="s", command="x", tools=["a", "gone"], effects={"b": "read_only"},
                          approval={"nope": True})
    chosen, notes = select_tools(cfg, ["a", "b", "c"])
    assert chosen == ["a"]
    assert notes == ["tools lists gone, which the server does not offer",
                     "approval names nope, which the server does not offer"]
    everything, none = select_tools(McpServerConfig(name="s", command="x"), ["a", "b"])
    assert everything == ["a", "b"] and none == []


# -- results --------------------------------------------------------------------------------


def text(*parts: str, is_error: bool = False, structured: Any = None) -> Any:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=p) for p in parts], is_error=is_error,
        structured_content=structured)


def test_results_for_the_model() -> None:
    assert result_content(text("hello")) == "hello"
    assert result_content(text("a", "b", structured={"x": 1})) == "a\nb"
    assert result_content(text(structured={"x": 1})) == {"x": 1}
    assert result_content(text()) == ""
    mixed = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(text="a chart:"),
        mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
        mcp_types.ImageContent(data="AAAA", mime_type="image/bmp")])
    assert result_content(mixed) == [
        {"type": "text", "text": "a chart:"}, ToolImage("image/png", b"\x00\x00\x00"),
        {"type": "image", "mime_type": "image/bmp", "note": "3 bytes of image data, not shown"}]
    assert error_text(text("disk full", is_error=True)) == "disk full"
    assert error_text(text(is_error=True)) == "the tool reported an error without a message"


def test_arguments_are_checked_against_the_schema() -> None:
    check = argument_check({"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]})
    assert check is not None
    check({"n": 3})
    with pytest.raises(ValueError, match="n: 'x' is not of type 'integer'"):
        check({"n": "x"})
    with pytest.raises(ValueError, match="arguments: 'n' is a required property"):
        check({})
    assert argument_check({"type": 12}) is None  # an invalid schema checks nothing


async def test_a_schema_tool() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def call(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        seen.append((ctx.idempotency_key, arguments))
        return {"ok": True}

    made = Tool.from_schema("srv__x", "Does x.", {"title": "T", "type": "object"}, call,
                            effect="idempotent_write", requires_approval=True, timeout_s=3)
    assert made.spec.parameters == {"title": "T", "type": "object", "properties": {}}
    assert (made.effect, made.requires_approval, made.timeout_s) == ("idempotent_write", True, 3)
    assert made.validate({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="must be a JSON object, got an array"):
        made.validate([1])
    assert not made.with_approval(False).requires_approval
    result = await made.invoke(ToolContext("r", "t", "c", "key"), {"a": 1})
    assert result == {"ok": True} and seen == [("key", {"a": 1})]


# -- restarts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "delay"), [(0, 1.0), (1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0),
                            (50, 60.0)])
def test_backoff_doubles_up_to_the_maximum(failures: int, delay: float) -> None:
    assert backoff_delay(failures, 1.0, 60.0) == delay


def test_tools_that_run_only_as_tasks_are_left_out_with_a_note() -> None:
    def listed(name: str, support: str | None) -> mcp_types.Tool:
        execution = None if support is None else mcp_types.ToolExecution(task_support=support)
        return mcp_types.Tool(name=name, input_schema={"type": "object"}, execution=execution)

    def call_for(name: str) -> Any:
        async def call(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
            return name
        return call

    tools = [listed("plain", None), listed("either", "optional"), listed("never", "forbidden"),
             listed("batch", "required"), listed("export", "required")]
    made, notes = build_tools(McpServerConfig(name="s", command="x"), tools, call_for)
    assert sorted(made) == ["s__either", "s__never", "s__plain"]
    assert notes == ['batch, export left out: they run only as an MCP task '
                     '(execution.taskSupport "required"), which maiden does not support']
    chosen = McpServerConfig(name="s", command="x", tools=["batch", "plain"])
    made, notes = build_tools(chosen, tools, call_for)
    assert list(made) == ["s__plain"]
    assert notes == ['batch left out: it runs only as an MCP task (execution.taskSupport '
                     '"required"), which maiden does not support']
