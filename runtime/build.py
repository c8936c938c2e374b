"""Build the runtime's parts from their config sections."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from .builtins import builtin_tools
from .engine.tracing import note_retry
from .errors import ConfigError
from .model.attachments.parts import Seeing
from .model.config import ProviderConfig, StoreConfig, ToolsConfig
from .providers.base import Provider
from .providers.echo import EchoProvider
from .providers.scripted import ScriptedProvider
from .stores.base import Store
from .stores.dsn import redact_dsn
from .stores.files import FilesStore
from .stores.sqlite import SQLiteStore
from .tools.registry import ToolRegistry

__all__ = ["describe_store", "make_provider", "make_store", "make_tools", "redact_dsn", "resolve"]


def resolve(base_dir: Path, path: str) -> Path:
    """A path from the config: relative ones are relative to the config file's folder."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else base_dir / p


def make_store(cfg: StoreConfig, base_dir: Path, env: Mapping[str, str] | None = None) -> Store:
    """The configured store, not opened yet. PostgreSQL's driver loads only for it; its
    connection string comes from ``[store] dsn_env`` (``ConfigError`` if unset)."""
    if cfg.kind == "postgres":
        dsn = cfg.dsn(env)
        from .stores.postgres import PostgresStore

        return PostgresStore(dsn, schema=cfg.pg_schema, pool_size=cfg.pool_size)
    path = resolve(base_dir, cfg.path)
    if cfg.kind == "files":
        return FilesStore(path)
    return SQLiteStore(path, synchronous=cfg.synchronous)


def describe_store(cfg: StoreConfig, base_dir: Path,
                   env: Mapping[str, str] | None = None) -> str:
    """Where the store is, for banners and checks (a DSN without its password)."""
    if cfg.kind != "postgres":
        return f"{cfg.kind} at {resolve(base_dir, cfg.path)}"
    dsn = (os.environ if env is None else env).get(cfg.dsn_env, "")
    where = redact_dsn(dsn) if dsn else f"${cfg.dsn_env} (not set)"
    return f"postgres at {where}, schema {cfg.pg_schema}"



_DEFAULT_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_EXAMPLE_MODEL = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1-mini"}


async def store_versions(cfg: StoreConfig, base_dir: Path) -> tuple[str, int] | None:
    """Open the store (migrating it if needed) and return what it runs on: for PostgreSQL
    the server's version and the schema's; None for the embedded stores."""
    if cfg.kind != "postgres":
        return None
    from .stores.postgres import PostgresStore

    store = make_store(cfg, base_dir)
    assert isinstance(store, PostgresStore)
    async with store:
        return await store.versions()


def make_provider(
    cfg: ProviderConfig, base_dir: Path, env: Mapping[str, str] | None = None
) -> Provider:
    """The provider ``cfg`` describes; API keys are read from ``env`` (default os.environ)."""
    if cfg.kind in ("anthropic", "openai"):
        return _http_provider(cfg, os.environ if env is None else env)
    if cfg.kind == "echo":
        return EchoProvider()
    if cfg.kind == "scripted":
        if not cfg.script:
            raise ConfigError([("provider.script", "the scripted provider needs a script file")])
        return ScriptedProvider.from_file(resolve(base_dir, cfg.script))
    raise ConfigError([("provider.kind", f"unknown provider kind {cfg.kind!r}")])


def _http_provider(cfg: ProviderConfig, env: Mapping[str, str]) -> Provider:
    kind = cfg.kind
    if not cfg.model:
        raise ConfigError([("provider.model", f"the {kind} provider needs a model, "
                            f"e.g. model = {_EXAMPLE_MODEL[kind]!r}")])
    key_env = cfg.api_key_env or _DEFAULT_KEY_ENV[kind]
    api_key = env.get(key_env) or None
    # A custom base_url may be a local server that needs no key; OpenAI's own API does.
    if api_key is None and (kind == "anthropic" or not cfg.base_url):
        raise ConfigError([("provider.api_key_env",
                            f"the {kind} provider needs an API key: the environment variable "
                            f"{key_env} is not set")])
    from .providers.http import Retry  # httpx loads only when a model API is used

    retry = Retry(max_retries=cfg.max_retries, noted=note_retry)
    official = kind == "anthropic" or not cfg.base_url \
        or urlsplit(cfg.base_url).hostname == "api.openai.com"
    seeing = Seeing(images=cfg.vision, pdfs=cfg.pdf == "native" or (cfg.pdf == "auto"
                                                                     and official))
    if kind == "anthropic":
        from .providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
        from .providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            cfg.model, api_key=api_key, api_key_env=key_env,
            base_url=cfg.base_url or ANTHROPIC_URL, timeout_s=cfg.timeout_s, retry=retry,
            max_output_tokens=cfg.max_output_tokens, temperature=cfg.temperature,
            stream=cfg.stream, seeing=seeing)
    from .providers.openai import DEFAULT_BASE_URL as OPENAI_URL
    from .providers.openai import OpenAIProvider

    return OpenAIProvider(
        cfg.model, api_key=api_key, api_key_env=key_env, base_url=cfg.base_url or OPENAI_URL,
        timeout_s=cfg.timeout_s, retry=retry, max_output_tokens=cfg.max_output_tokens,
        temperature=cfg.temperature, stream=cfg.stream, seeing=seeing)


def make_tools(cfg: ToolsConfig, base_dir: Path) -> ToolRegistry:
    registry = ToolRegistry(builtin_tools(cfg, base_dir))
    for module in cfg.modules:
        registry.add_module(module, base_dir)
    for name, required in cfg.approval.items():
        found = registry.get(name)
        if found is None:
            raise ConfigError([(f"tools.approval.{name}", "no tool has that name")])
        registry.replace(found.with_approval(required))
    return registry
