"""``[[mcp_servers]]``: one MCP server whose tools the agent may use.

    [[mcp_servers]]
    name = "files"                       # its tools are offered as files__{tool}
    command = "npx"                      # a stdio server: started by maiden, stopped with it
    args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"]
    env = { LOG_LEVEL = "warn" }         # literal values (kept in the file: no secrets here)
    env_from = ["GITHUB_TOKEN"]          # passed through from maiden's own environment
    tools = ["read_file", "list_directory"]   # allowlist; empty: every tool it offers
    effects = { write_file = "idempotent_write" }
    approval = { write_file = true }
    timeout_s = 30                       # per call
    startup_timeout_s = 60               # to start and list its tools

    [[mcp_servers]]
    name = "search"
    url = "https://mcp.example.com/mcp"  # a streamable HTTP server
    headers_env = { Authorization = "SEARCH_MCP_AUTH" }   # header -> variable holding its value

Secrets only come from the environment: ``env_from`` and ``headers_env`` name variables,
the file never holds their values. A stdio server inherits only a minimal environment
(PATH, HOME, USER, LOGNAME, SHELL, TERM) plus ``env`` and ``env_from``, and runs in the
config file's folder.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ..base import Effect

__all__ = ["McpServerConfig"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class McpServerConfig(BaseModel):
    """One ``[[mcp_servers]]`` entry: exactly one of ``command`` (stdio) or ``url`` (HTTP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="letters, digits, _ and -; tools are named {name}__{tool}")
    url: str | None = Field(default=None, description="a streamable HTTP server's endpoint")
    headers_env: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP header -> the environment variable holding its value (url servers)"))
    command: str | None = Field(default=None, validate_default=True,
                                description="the program that runs a stdio server")
    args: list[str] = Field(default_factory=list,
                            description="the arguments command is started with")
    env: dict[str, str] = Field(default_factory=dict,
                                description="extra environment variables, literal values")
    env_from: list[str] = Field(default_factory=list, description=(
        "variables passed through from maiden's environment (secrets)"))
    tools: list[str] = Field(default_factory=list,
                             description="the server's tools to offer; empty: all of them")
    effects: dict[str, Effect] = Field(default_factory=dict, description=(
        "tool -> effect class, over what the server's annotations say"))
    approval: dict[str, bool] = Field(default_factory=dict,
                                      description="tool -> requires_approval")
    timeout_s: float = Field(default=30.0, gt=0, le=3600,
                             description="how long one call may take")
    startup_timeout_s: float = Field(default=60.0, gt=0, le=3600, description=(
        "how long starting the server and listing its tools may take"))
    restart_backoff_s: float = Field(default=1.0, gt=0, le=3600, description=(
        "the first wait before restarting a server that died or failed to start"))
    restart_backoff_max_s: float = Field(default=60.0, gt=0, le=86400, description=(
        "the wait doubles after each failed start, up to this"))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("use 1 to 32 letters, digits, '_' or '-' (tools are named "
                             f"{{name}}__{{tool}}), not {value!r}")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError(f"an http:// or https:// URL is needed, not {value!r}")
        return value

    @field_validator("command")
    @classmethod
    def _one_transport(cls, value: str | None, info: ValidationInfo) -> str | None:
        url = info.data.get("url")
        if value is not None and url is not None:
            raise ValueError("give either command (a stdio server) or url (an HTTP server), "
                             "not both")
        if value is None and url is None and "url" in info.data:
            raise ValueError("required: command (to start a stdio server) or url (an HTTP "
                             "server)")
        if value is not None and not value.strip():
            raise ValueError("the command is empty")
        return value

    @field_validator("args", "env", "env_from")
    @classmethod
    def _stdio_only(cls, value: Any, info: ValidationInfo) -> Any:
        if value and info.data.get("url") is not None:
            raise ValueError("only for a command (stdio) server, not a url one")
        return value

    @field_validator("headers_env")
    @classmethod
    def _headers(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if value and info.data.get("url") is None and "url" in info.data:
            raise ValueError("only for a url (HTTP) server")
        for header, var in value.items():
            if not re.fullmatch(r"[A-Za-z0-9-]+", header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            if not _ENV_NAME.fullmatch(var):
                raise ValueError(f"{var!r} (for {header}) is not an environment variable name")
        return value

    @field_validator("env_from")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not _ENV_NAME.fullmatch(v)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
        return value

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "http" if self.url is not None else "stdio"

    def describe(self) -> str:
        """Where the server is, for the banner and ``maiden check``."""
        if self.url is not None:
            return f"http {self.url}"
        return "stdio " + " ".join([self.command or "", *self.args])

    def needed_envs(self) -> dict[str, str]:
        """Each secret variable it reads: its key path (below the entry) -> the name."""
        found = {f"env_from.{i}": var for i, var in enumerate(self.env_from)}
        found.update({f"headers_env.{h}": var for h, var in self.headers_env.items()})
        return found
