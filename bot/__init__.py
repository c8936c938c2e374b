"""The maiden application: config, composition and the command line.

Its names load on first use, so that `python -m bot` and the `maiden` script start with
nothing imported: Ctrl-C while the rest loads is then theirs to answer (one line).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import LoadedConfig, MaidenConfig, load_config, parse_config

__all__ = ["LoadedConfig", "MaidenConfig", "load_config", "parse_config"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".config", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
