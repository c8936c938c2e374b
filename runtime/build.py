"""Build the runtime's parts from their config sections."""

from __future__ import annotations

from pathlib import Path

from .builtin_tools import BUILTIN_TOOLS
from .config import ProviderConfig, StoreConfig, ToolsConfig
from .errors import ConfigError
from .providers.base import Provider
from .providers.echo import EchoProvider
from .providers.scripted import ScriptedProvider
from .stores.base import Store
from .stores.files import FilesStore
from .stores.sqlite import SQLiteStore
from .tools import ToolRegistry

__all__ = ["make_provider", "make_store", "make_tools", "resolve"]


def resolve(base_dir: Path, path: str) -> Path:
    """A path from the config: relative ones are relative to the config file's folder."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else base_dir / p


def make_store(cfg: StoreConfig, base_dir: Path) -> Store:
    path = resolve(base_dir, cfg.path)
    if cfg.kind == "files":
        return FilesStore(path)
    return SQLiteStore(path, synchronous=cfg.synchronous)


def make_provider(cfg: ProviderConfig, base_dir: Path) -> Provider:
    if cfg.kind == "echo":
        return EchoProvider()
    if cfg.kind == "scripted":
        if not cfg.script:
            raise ConfigError([("provider.script", "the scripted provider needs a script file")])
        return ScriptedProvider.from_file(resolve(base_dir, cfg.script))
    raise ConfigError([("provider.kind", f"{cfg.kind!r} is not available in this version yet "
                        "(use 'echo' or 'scripted')")])


def make_tools(cfg: ToolsConfig, base_dir: Path) -> ToolRegistry:
    registry = ToolRegistry(BUILTIN_TOOLS[name] for name in cfg.builtins)
    for module in cfg.modules:
        registry.add_module(module, base_dir)
    return registry
