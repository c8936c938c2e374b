"""The operator console: server-rendered pages at ``/`` over the runtime's public API,
live through the vendored htmx and its SSE extension (``static/VENDORED.md``)."""

from .console import ConsoleOptions, RulesSource, StatusSource
from .mount import mount_console

__all__ = ["ConsoleOptions", "RulesSource", "StatusSource", "mount_console"]
