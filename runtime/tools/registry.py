"""ToolRegistry: the tools one agent can use, by name, from code and from modules."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ConfigError, ToolDefinitionError
from ..model.toolspec import ToolSpec
from .base import Tool

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """The tools one agent can use, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        if t.name in self._tools and self._tools[t.name] is not t:
            raise ToolDefinitionError(f"two tools are named {t.name!r}")
        self._tools[t.name] = t

    def replace(self, t: Tool) -> None:
        """Put ``t`` in place of the tool of the same name."""
        self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def check_needs(self, provided: Iterable[str]) -> None:
        """``ToolDefinitionError`` unless every service a tool ``needs`` is ``provided``."""
        given = set(provided)
        for t in self._tools.values():
            missing = sorted(t.needs - given)
            if missing:
                raise ToolDefinitionError(f"tool {t.name!r} needs {', '.join(missing)}, "
                                          "which this runtime is not given")

    def add_module(self, module_name: str, base_dir: Path | None = None) -> list[Tool]:
        """Import ``module_name`` (looked up in ``base_dir`` first) and add every Tool in it."""
        if base_dir is not None and str(base_dir) not in sys.path:
            sys.path.insert(0, str(base_dir))
        try:
            module = importlib.import_module(module_name)
        except (Exception, SystemExit) as exc:  # the user's module's error, of any kind
            what = f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) \
                else f"{type(exc).__name__}: {exc}"
            raise ConfigError([("tools.modules", f"cannot import {module_name!r}: {what}")]) \
                from exc
        found = [v for v in vars(module).values() if isinstance(v, Tool)]
        if not found:
            raise ConfigError([("tools.modules", f"module {module_name!r} defines no @tool")])
        for t in found:
            self.add(t)
        return found
