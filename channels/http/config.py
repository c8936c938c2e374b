"""``[http]`` in agent.toml: the HTTP API that `maiden run` serves."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from runtime import ConfigError

__all__ = ["HttpConfig", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpConfig(BaseModel):
    """``[http]``: where the API listens, its token, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    host: str = Field(default="127.0.0.1",
                      description="anything but loopback needs a token (token_env)")
    port: int = Field(default=8765, ge=0, le=65535, description="0: any free port")
    token_env: str | None = Field(
        default=None, description="the variable holding the bearer token clients must send")
    max_body_bytes: int = Field(default=1_048_576, ge=1024,
                                description="larger request bodies get 413")
    console: bool = Field(default=True, description=(
        "serve the operator console at / (behind the same token as the API)"))
    console_approvals: bool = Field(default=True, description=(
        "false: the console shows pending approvals but cannot decide them"))
    keepalive_s: float = Field(default=15.0, gt=0,
                               description="an event stream silent this long sends a comment "
                                           "line, so proxies keep it open")

    def token(self, env: Mapping[str, str] | None = None, source: str = "agent.toml") -> str | None:
        """The bearer token, from the variable ``token_env`` names.

        Without one, refuse (``ConfigError``) to listen on anything but loopback: the API
        runs tools, and anyone who can reach it could make it do so.
        """
        env = os.environ if env is None else env
        token = env.get(self.token_env) if self.token_env else None
        if not token and not is_loopback(self.host):
            why = f"${self.token_env} is not set" if self.token_env else "no [http] token_env"
            raise ConfigError([("http.host", (
                f"{self.host!r} is not a loopback address and {why}: without a token the HTTP "
                "API only listens on 127.0.0.1 / ::1. Set [http] token_env to a variable "
                "holding a long random token (clients send 'Authorization: Bearer <token>'), "
                "or use host = \"127.0.0.1\""))], source)
        return token or None
