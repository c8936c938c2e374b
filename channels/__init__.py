"""Adapters between people and the runtime: the terminal and the HTTP API; Slack and Discord
next. The HTTP API loads FastAPI and uvicorn on first use, so the CLI does not pay for them."""

from typing import TYPE_CHECKING, Any

from .terminal import chat, render_entry, render_run, render_transition

__all__ = [
    "HttpApi",
    "HttpServer",
    "HttpSettings",
    "chat",
    "create_app",
    "render_entry",
    "render_run",
    "render_transition",
]

if TYPE_CHECKING:
    from .http import HttpApi, create_app
    from .http_models import HttpSettings
    from .http_server import HttpServer

_LAZY = {"HttpApi": "http", "create_app": "http", "HttpSettings": "http_models",
         "HttpServer": "http_server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
