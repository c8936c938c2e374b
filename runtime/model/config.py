"""The runtime's sections of agent.toml, as pydantic models (the app composes the file)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ConfigError
from .entries import Usage
from .memories import MAX_MEMORY_CHARS, ScopeKind

__all__ = [
    "AGENT_NAME",
    "AgentConfig",
    "BuiltinTool",
    "FilesConfig",
    "HttpFetchConfig",
    "MemoryConfig",
    "Prices",
    "ProviderConfig",
    "RuntimeConfig",
    "Sandbox",
    "ShellConfig",
    "StoreConfig",
    "ToolsConfig",
]

AGENT_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""What an agent may be called (it is also a model id on the OpenAI wire)."""

DEFAULT_SYSTEM_PROMPT = (
    "You are maiden, a careful assistant working for a team. Answer concisely. "
    "Use a tool only when it helps, and never repeat a call that already failed."
)


class Section(BaseModel):
    """A config section: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(Section):
    name: str = Field(default="maiden", description=(
        "the agent's name: in the banner and traces, and its model id over HTTP"))
    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, description=(
        "the instructions sent first in every model request"))
    max_turns: int = Field(default=12, ge=1, description="model turns one run may take")
    max_tool_calls_per_turn: int = Field(
        default=8, ge=1,
        description="tool calls run from one model turn; those beyond get too_many_calls")
    repeat_limit: int = Field(default=3, ge=2,
                              description="the Nth identical consecutive call is refused")
    max_recovery_attempts: int = Field(default=3, ge=1,
                                       description="crashes survived before a run is poison")
    approvers: list[str] = Field(default_factory=list,
                                 description="who may approve; empty: anyone who can reach it")
    approval_timeout_s: float | None = Field(default=None, gt=0,
                                             description="then the run goes to timed_out")
    timezone: str = Field(default="UTC",
                          description="IANA zone: the default for schedules' crontab lines")
    max_message_chars: int = Field(
        default=100_000, ge=1,
        description="longer inbound messages are refused, from every channel")
    compaction: Literal["drop", "summary"] = Field(default="drop", description=(
        "what becomes of history the window leaves out: dropped, or summarised by the model "
        "(the summary is stored in the thread)"))
    max_context_tokens: int | None = Field(
        default=None, ge=1,
        description="tokens of prompt per request (the newest history that fits, estimated); "
        "None: from the model's context size, less room for the reply")


class Prices(Section):
    """USD per million tokens, so budgets and ``maiden usage`` can count cost."""

    input: float = Field(default=0.0, ge=0,
                         description="USD per million input tokens (those not read from or "
                                     "written to a cache)")
    output: float = Field(default=0.0, ge=0, description="USD per million output tokens")
    cache_read: float = Field(default=0.0, ge=0,
                              description="USD per million input tokens read from the "
                                          "provider's prompt cache")
    cache_write: float = Field(default=0.0, ge=0,
                               description="USD per million input tokens written to the "
                                           "prompt cache (anthropic)")

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost in USD."""
        return (usage.input_tokens * self.input + usage.output_tokens * self.output
                + usage.cache_read_tokens * self.cache_read
                + usage.cache_creation_tokens * self.cache_write) / 1_000_000


class ProviderConfig(Section):
    kind: Literal["echo", "scripted", "anthropic", "openai"] = Field(
        default="echo", description=(
            "echo: offline, repeats the message (/tool NAME {json} calls a tool); "
            "scripted: replays script; anthropic; openai, or a compatible server at "
            "base_url"))
    model: str | None = Field(default=None, description=(
        "the model's id, e.g. claude-sonnet-4-5 or gpt-4.1-mini; required for anthropic "
        "and openai"))
    base_url: str | None = Field(default=None, description=(
        "the API's root; unset: the vendor's (https://api.anthropic.com, "
        "https://api.openai.com/v1); openai: any compatible server, e.g. "
        "http://127.0.0.1:11434/v1 (it may need no key)"))
    api_key_env: str | None = Field(
        default=None, description="default ANTHROPIC_API_KEY / OPENAI_API_KEY by kind")
    timeout_s: float = Field(default=60.0, gt=0,
                             description="per attempt: until the response starts, and the "
                                         "longest silence allowed while it streams")
    max_retries: int = Field(default=3, ge=0, description=(
        "retries of a request that got a 429 or a 5xx, could not connect or timed out, "
        "with backoff (0: none)"))
    max_output_tokens: int | None = Field(default=None, ge=1,
                                          description="anthropic: 4096 when not set")
    temperature: float | None = Field(default=None, ge=0, le=2,
                                      description="sampling temperature; unset: the model's "
                                                  "default")
    stream: bool = Field(default=True, description="stream tokens as they are generated")
    vision: bool = Field(default=True, description=(
        "the model sees images (false: it is told of each image by name and size instead)"))
    pdf: Literal["auto", "native", "text"] = Field(default="auto", description=(
        "how PDFs reach the model: native (anthropic: document blocks; openai: file parts), "
        "text (their text, extracted here), auto (native, except on an openai-compatible "
        "server other than OpenAI's own)"))
    prices: Prices = Prices()
    script: str | None = Field(default=None,
                               description="scripted: a JSON file of turns, relative to the config")

    @field_validator("base_url")
    @classmethod
    def _a_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host (and a port that is a number), or nothing."""
        if value is None:
            return None
        try:
            url = urlsplit(value)
            url.port  # noqa: B018 -- raises ValueError for a port that is not a number
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL with a host, such as "
                             "http://127.0.0.1:11434/v1")
        return value


class StoreConfig(Section):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: Literal["sqlite", "files", "postgres"] = Field(default="sqlite", description=(
        "sqlite: one database file; files: a folder, one JSON file per thread; postgres: a "
        "PostgreSQL database, for several replicas"))
    path: str = Field(default="data/maiden.db", min_length=1,
                      description="sqlite, files: relative paths are relative to the config "
                                  "file's folder")
    synchronous: Literal["off", "normal", "full", "extra"] = Field(
        default="full", description=(
            "sqlite: PRAGMA synchronous of the durable commits (the others: normal); off or "
            "normal: no commit waits for the disk, so a power cut may lose the latest"))
    dsn_env: str = Field(default="MAIDEN_PG_DSN", min_length=1, description=(
        "postgres: the variable holding the connection string, "
        "postgresql://user:password@host:5432/database"))
    pool_size: int = Field(default=10, ge=1, le=500,
                           description="postgres: connections per process")
    open_wait_s: float = Field(default=60.0, ge=0, description=(
        "postgres: how long `maiden run` keeps trying a server it cannot reach at start "
        "(then it stops with the error); 0: it does not wait"))
    pg_schema: str = Field(default="maiden", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                           description="postgres: the schema maiden's tables live in")

    def dsn(self, env: Mapping[str, str] | None = None, source: str | None = None) -> str:
        """The PostgreSQL connection string from ``dsn_env``; ``ConfigError`` if unset."""
        value = (os.environ if env is None else env).get(self.dsn_env, "").strip()
        if not value:
            raise ConfigError([("store.dsn_env", (
                f"${self.dsn_env} is not set: [store] kind = \"postgres\" needs a connection "
                "string there, e.g. postgresql://maiden:PASSWORD@db.internal:5432/maiden"))],
                source)
        return value


class RuntimeConfig(Section):
    concurrency: Literal["global", "thread"] = Field(default="global", description=(
        "global: one run at a time in the process; thread: different threads' runs at "
        "once (a thread's own runs always go one after another)"))
    cancel_grace_s: float = Field(default=5.0, ge=0,
                                  description="SIGTERM to SIGKILL for a cancelled subprocess")
    shutdown_grace_s: float = Field(default=10.0, ge=0,
                                    description="how long shutdown waits for a checkpoint")
    poll_interval_s: float = Field(default=0.5, gt=0,
                                   description="how often requests from other processes are read")
    lease_ttl_s: float = Field(default=10.0, gt=0, description=(
        "how long a thread's lease outlives a process that stopped renewing it (a machine "
        "that died); a process of this machine that died is noticed at once"))
    lease_linger_s: float = Field(default=1.0, ge=0, le=60, description=(
        "how long a thread's lease is kept after its last run, for the thread's next "
        "message (0: given up at once)"))
    recovery_before_ready_s: float = Field(default=5.0, ge=0, description=(
        "how long `maiden run` lets recovery of the unfinished runs go on before it opens "
        "the channels and says Ready; a longer one goes on with them open (a thread's new "
        "messages are answered after its recovered run)"))


class HttpFetchConfig(Section):
    """``[tools.http_fetch]``."""

    allow_private: bool = Field(default=False, description=(
        "true: loopback, private, link-local and other non-public addresses are fetched too "
        "(cloud metadata addresses never are)"))
    allow_hosts: list[str] = Field(default_factory=list, description=(
        "if set, only these hosts (and their subdomains with a leading '.': '.example.com')"))
    deny_hosts: list[str] = Field(default_factory=list,
                                  description="hosts never fetched (same syntax)")
    max_bytes: int = Field(default=1_000_000, ge=1, le=50_000_000,
                           description="the body is read up to this many bytes")
    max_chars: int = Field(default=20_000, ge=100, le=1_000_000,
                           description="the text handed to the model is cut here")
    timeout_s: float = Field(default=15.0, gt=0, le=300,
                             description="seconds the whole fetch may take, redirects "
                                         "included")
    max_redirects: int = Field(default=5, ge=0, le=20,
                               description="redirects followed (each checked); one more "
                                           "fails the fetch")


Sandbox = Literal["auto", "bwrap", "off"]
"""``[tools.shell] sandbox``: bwrap when it works (auto), bwrap or refuse, or never."""


class ShellConfig(Section):
    """``[tools.shell]``."""

    workdir: str = Field(default=".", description="relative to the config file")
    allow: list[str] = Field(default_factory=list, description=(
        "command prefixes allowed (e.g. 'git status', 'ls'); empty: any command"))
    timeout_s: float = Field(default=60.0, gt=0, le=3600, description=(
        "seconds a command may run; then it and what it started get SIGTERM (SIGKILL "
        "after [runtime] cancel_grace_s) and it answers timed_out"))
    max_output_bytes: int = Field(default=64_000, ge=100, le=10_000_000, description=(
        "stdout and stderr are each cut here (the rest is read and dropped)"))
    requires_approval: bool = Field(default=True,
                                    description="a person approves each command first")
    pass_env: list[str] = Field(
        default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER",
                                 "LOGNAME", "TMPDIR", "TERM"],
        description="the environment variables a command sees (nothing else: no API keys)")
    sandbox: Sandbox = Field(default="auto", description=(
        "auto: run each command under bubblewrap (own PID namespace and /proc, so it cannot "
        "read maiden's environment) when bwrap works here; bwrap: refuse commands without "
        "it; off: never (own session and a non-dumpable maiden only)"))
    run_as: str = Field(default="nobody", min_length=1, description=(
        "when maiden runs as root: the unprivileged user (name or uid) each command runs "
        "as, so it cannot read maiden's /proc or files; it must be able to enter workdir. "
        "Ignored when maiden is not root"))


class FilesConfig(Section):
    """``[files]``: what people may share with the agent (per file, per message)."""

    max_bytes: int = Field(default=20_000_000, ge=1, le=500_000_000,
                           description="the largest file taken in")
    max_per_message: int = Field(default=10, ge=0, le=100,
                                 description="files read from one message (0: none)")
    allowed_types: list[str] = Field(default_factory=lambda: ["*/*"], description=(
        "media types taken in, or patterns such as 'image/*'; others are refused"))
    text_share: float = Field(default=0.25, gt=0, le=1, description=(
        "the share of the context window the text files of one message may fill (each "
        "beyond its share is cut, with a note)"))
    retention_days: float = Field(default=30.0, ge=0, description=(
        "maiden files prune: how old a blob no message names must be to be removed"))

    @field_validator("allowed_types")
    @classmethod
    def _types(cls, value: list[str]) -> list[str]:
        for pattern in value:
            kind, _, sub = pattern.partition("/")
            if not kind or not sub or (kind == "*" and sub != "*"):
                raise ValueError(f"{pattern!r} is not a media type or pattern: use forms "
                                 "such as 'image/png', 'image/*' or '*/*'")
        return [p.lower() for p in value]

    def allows(self, media_type: str) -> bool:
        kind = media_type.split("/", 1)[0]
        return any(p in ("*/*", media_type) or p == f"{kind}/*" for p in self.allowed_types)


class MemoryConfig(Section):
    """``[tools.memory]``: memories the model keeps with ``remember`` (a scope each), finds
    with ``recall``, removes with ``forget``; and the ones recalled unasked as a run starts."""

    scopes: list[ScopeKind] = Field(default=["thread", "place", "person"], description=(
        "the scopes the model may write: thread, place (the Slack or Discord channel), "
        "person (the sender), agent, workspace (every conversation; needs the operate "
        "right)"))
    default_scope: ScopeKind | None = Field(default=None, description=(
        "the scope of a memory the model names none for (one of scopes); unset: thread "
        "(or the older scope key's)"))
    max_chars: int = Field(default=MAX_MEMORY_CHARS, ge=1, le=1_000_000, description=(
        f"per memory (at most {MAX_MEMORY_CHARS:,} whatever is set: a memory is a short "
        "statement)"))
    recall_share: float = Field(default=0.05, ge=0, le=0.5, description=(
        "the share of the model's context window that memories recalled unasked, as a run "
        "starts, may fill (0: none are; the model can still call recall)"))
    recall_limit: int = Field(default=5, ge=0, le=100, description=(
        "the most memories recalled unasked as a run starts (0: none)"))
    flush: bool = Field(default=True, description=(
        "with compaction = \"summary\": before older entries are summarised, ask the model "
        "once what of them is worth keeping, and keep each statement as a thread memory"))
    scope: Literal["thread", "agent"] | None = Field(default=None, description=(
        "older key: the default scope (it is added to scopes); use default_scope"))
    max_notes: int | None = Field(default=None, ge=1, le=100_000, description=(
        "older key, no longer used (memories are not counted per scope); accepted so "
        "older files load"))

    @property
    def writable(self) -> frozenset[ScopeKind]:
        """The scopes the model may write (``scopes``, and the older ``scope``)."""
        return frozenset([*self.scopes, *([self.scope] if self.scope else [])])

    @property
    def default(self) -> ScopeKind:
        """The scope of a memory the model names none for."""
        return self.default_scope or self.scope or "thread"

    @model_validator(mode="after")
    def _default_writable(self) -> MemoryConfig:
        if self.default not in self.writable:
            raise ValueError(f"default_scope {self.default!r} is not in scopes "
                             f"{sorted(self.writable)}: the model could not write it")
        return self


BuiltinTool = Literal["clock", "http_fetch", "memory", "search_knowledge", "send_message",
                      "shell"]


class OtelConfig(Section):
    """``[otel]``: traces over OTLP/HTTP (off without an endpoint)."""

    endpoint: str = Field(default="", description=(
        "the OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (traces go to /v1/traces); "
        "empty: no traces"))
    headers_env: str | None = Field(default=None, description=(
        "an environment variable holding the exporter's headers, key=value,key2=value2 "
        "(an API key: never in the file)"))
    service_name: str = Field(default="maiden", min_length=1,
                              description="the service.name spans are reported under")
    sample_ratio: float = Field(default=1.0, ge=0, le=1,
                                description="the share of runs traced (a run's spans all or none)")
    capture_content: bool = Field(default=False, description=(
        "true: messages, answers and tool arguments and results go into spans too"))
    timeout_s: float = Field(default=10.0, gt=0, le=120,
                             description="seconds one export of spans to the collector "
                                         "may take")
    trace_url: str = Field(default="", description=(
        "where a trace is shown, with {trace_id} in it, e.g. "
        "https://tempo.example/trace/{trace_id}: the console's run page links to it"))

    @field_validator("trace_url")
    @classmethod
    def _link(cls, value: str) -> str:
        if value and ("{trace_id}" not in value
                      or urlsplit(value).scheme not in ("http", "https")):
            raise ValueError("an http(s) URL with {trace_id} in it, e.g. "
                             "https://tempo.example/trace/{trace_id}")
        return value

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("an http:// or https:// URL, e.g. http://127.0.0.1:4318")
        return value.rstrip("/")

    def traces_url(self) -> str:
        """Where spans are posted: the endpoint's ``/v1/traces`` unless it names a path."""
        return self.endpoint if urlsplit(self.endpoint).path not in ("", "/") \
            else f"{self.endpoint}/v1/traces"


class ToolsConfig(Section):
    modules: list[str] = Field(default_factory=list,
                               description="modules next to the config with @tool functions")
    builtins: list[BuiltinTool] = Field(
        default_factory=lambda: ["clock"],  # type: ignore[arg-type]
        description="the built-in tools offered ([[agents]] builtins may narrow them)")
    http_fetch: HttpFetchConfig = HttpFetchConfig()
    shell: ShellConfig = ShellConfig()
    memory: MemoryConfig = MemoryConfig()
    approval: dict[str, bool] = Field(default_factory=dict,
                                      description="tool name -> requires_approval override")

