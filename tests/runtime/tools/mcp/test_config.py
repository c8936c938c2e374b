"""``[[mcp_servers]]`` (runtime/tools/mcp/config.py): a full entry, and every error naming
its key and the reason."""

from __future__ import annotations

import pytest

from bot.config import parse_config
from runtime import ConfigError

SERVER = '[[mcp_servers]]\nname = "srv"\ncommand = "python"\n'


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
