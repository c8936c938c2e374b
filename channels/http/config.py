"""``[http]`` in agent.toml: the HTTP API that `maiden run` serves."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime import ConfigError

from ..access import RIGHTS, Right
from .auth import LOCAL, Credential, Credentials
from .hosts import split_allowed

__all__ = ["HttpConfig", "HttpToken", "OpenAIApiConfig", "is_loopback"]

LEGACY_NAME = "operator"
"""The name of the one credential ``[http] token_env`` makes (it has every right)."""


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpToken(BaseModel):
    """``[[http.tokens]]``: a named credential; the request's identity is its ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_.@-]+$",
                      description="who the holder is: decisions and messages are recorded "
                                  "under this name")
    token_env: str = Field(min_length=1, description="the variable holding the token")
    rights: list[Right] = Field(min_length=1, description=(
        "talk (send messages), approve (decide calls), operate (cancel, resume, schedules)"))
    threads: list[str] = Field(default_factory=list, description=(
        "patterns of the threads made over HTTP it may read and write besides its own, "
        "e.g. 'support/*' (operate covers every thread)"))


class HttpConfig(BaseModel):
    """``[http]``: where the API listens, its token, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True,
                          description="false: `maiden run` serves no HTTP at all")
    host: str = Field(default="127.0.0.1",
                      description="anything but loopback needs a token (token_env)")
    port: int = Field(default=8765, ge=0, le=65535, description="0: any free port")
    token_env: str | None = Field(
        default=None, description="the variable holding the bearer token clients must send")
    tokens: list[HttpToken] = Field(default_factory=list, description=(
        "named tokens, each with its rights; with token_env as well, that one is named "
        f"{LEGACY_NAME!r} and has every right"))
    allowed_hosts: list[str] = Field(default_factory=list, description=(
        "more names clients may reach this server by (the Host header): 'name' (any port) "
        "or 'name:port', '*.example.com'; loopback's names and host always are"))
    cors_origins: list[str] = Field(default_factory=list, description=(
        "origins (scheme://host[:port]) whose pages may call the API (CORS); none: off"))
    max_body_bytes: int = Field(default=1_048_576, ge=1024,
                                description="larger request bodies get 413")
    console: bool = Field(default=True, description=(
        "serve the operator console at / (behind the same token as the API)"))
    console_approvals: bool = Field(default=True, description=(
        "false: the console shows pending approvals but cannot decide them"))
    header_timeout_s: float = Field(default=10.0, gt=0, le=300, description=(
        "a connection must send a request's headers within this long (from opening, or "
        "from its first byte after a kept-alive response), or it is closed: 408"))
    max_connections: int = Field(default=1000, ge=1, le=1_000_000, description=(
        "connections (and requests in progress) at once; a request beyond gets 503"))
    keepalive_s: float = Field(default=15.0, gt=0,
                               description="an event stream silent this long sends a comment "
                                           "line, so proxies keep it open")

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for entry in value:
            split_allowed(entry)  # ValueError: pydantic names the key
        return value

    @model_validator(mode="after")
    def _names(self) -> HttpConfig:
        names = [t.name for t in self.tokens] + ([LEGACY_NAME] if self.token_env else [])
        for name in names:
            if name == LOCAL:
                raise ValueError(f"tokens: {LOCAL!r} is the name of callers without a token")
            if names.count(name) > 1:
                raise ValueError(f"tokens: the name {name!r} is used twice")
        return self

    def credentials(self, env: Mapping[str, str] | None = None,
                    source: str = "agent.toml") -> Credentials:
        """The tokens clients may authenticate with, from the variables the config names.

        None at all: every caller is ``local``, which is only allowed on loopback
        (``ConfigError`` otherwise): the API runs tools, and anyone who could reach it
        could make it do so. A named token whose variable is unset is an error too.
        """
        env = os.environ if env is None else env
        found: list[Credential] = []
        missing: list[tuple[str, str]] = []
        for i, named in enumerate(self.tokens):
            value = env.get(named.token_env)
            if not value:
                missing.append((f"http.tokens.{i}.token_env",
                                f"${named.token_env} is not set (the token of {named.name!r})"))
            else:
                found.append(Credential(named.name, value, frozenset(named.rights),
                                        tuple(named.threads)))
        if missing:
            raise ConfigError(missing, source)
        legacy = env.get(self.token_env) if self.token_env else None
        if legacy:
            found.append(Credential(LEGACY_NAME, legacy, frozenset(RIGHTS)))
        if not found and not is_loopback(self.host):
            why = f"${self.token_env} is not set" if self.token_env else "no [http] token_env"
            raise ConfigError([("http.host", (
                f"{self.host!r} is not a loopback address and {why}: without a token the HTTP "
                "API only listens on 127.0.0.1 / ::1. Set [http] token_env to a variable "
                "holding a long random token (clients send 'Authorization: Bearer <token>'), "
                "or use host = \"127.0.0.1\""))], source)
        if not found and "*" in self.allowed_hosts:
            raise ConfigError([("http.allowed_hosts", (
                "'*' turns the Host check off, which without a token lets any web page the "
                "operator visits drive the agent (DNS rebinding): name the hosts, or set a "
                "token"))], source)
        return Credentials(found)

    def token(self, env: Mapping[str, str] | None = None, source: str = "agent.toml") -> str | None:
        """The ``token_env`` token alone (None without one); see ``credentials``."""
        credentials = self.credentials(env, source)
        legacy = credentials.named(LEGACY_NAME)
        return legacy.token if legacy is not None else None


class OpenAIApiConfig(BaseModel):
    """``[openai_api]``: the OpenAI-compatible routes (``/v1/chat/completions``,
    ``/v1/models``) of the HTTP API."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description=(
        "false: no OpenAI routes (/v1/chat/completions, /v1/responses, /v1/models)"))
    thread_from_user: bool = Field(default=False, description=(
        "a request's 'user' names its thread (openai:user:{user}), as X-Maiden-Thread does"))
    client_tools: Literal["refuse", "ignore"] = Field(default="refuse", description=(
        "a request that carries tools (maiden runs its own): refused with a 400, or its "
        "tools and tool messages left out"))
