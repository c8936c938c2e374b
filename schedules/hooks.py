"""``[[hooks]]``: jobs started by a webhook (``POST /v1/hooks/{name}``), each delivery once.

A sender (GitHub, a CI, a monitoring system) signs the body with a secret it shares with
maiden: ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body, hex>``, GitHub's form,
which most senders use (the header is configurable). A delivery with no valid signature
runs nothing; one over the hook's size limit neither. A valid one starts a run whose message
is the hook's ``prompt`` with the payload's fields put in, keyed by the sender's delivery id
(``X-GitHub-Delivery``, configurable; else the body's digest): a delivery sent again, as
senders do when an answer is lost, is the same run, and nothing more runs. The answer goes
where ``deliver`` says, as a schedule's does.

``take`` is the whole of a delivery; the rest is pure, but for ``load_hooks`` reading
each secret from the environment once, at start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime import ConfigError, HookRefused, Job, Origin, Run, Runtime

from .config import delivered_to, entry_key

__all__ = ["Hook", "HookConfig", "delivery_of", "hook_key", "load_hooks", "payload_of",
           "prompt_for", "take", "verify"]

PAYLOAD_CHARS = 20_000
"""How much of the payload's JSON ``{payload}`` puts in a prompt at most."""


class HookConfig(BaseModel):
    """One webhook."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="unique; letters, digits, _ . - (the URL: /v1/hooks/{name})")
    secret_env: str = Field(description=(
        "the environment variable holding the secret the sender signs the body with"))
    prompt: str | None = Field(default=None, description=(
        "the message the agent is sent: {field.sub} puts in the payload's field (\"\" if "
        "it has none), {payload} the whole payload as JSON (or tool)"))
    tool: str | None = Field(default=None, description=(
        "instead of prompt: a tool run with args, its output posted (no model asked)"))
    args: dict[str, Any] = Field(default_factory=dict, description=(
        "with tool: its arguments; in each text, {field.sub} as in prompt"))
    then_prompt: str | None = Field(default=None, description=(
        "with tool: the model is asked this (a template as prompt) about the output, and "
        "its answer is posted"))
    agent: str | None = Field(default=None, description="the agent that runs it (default: "
                              "the default agent)")
    deliver: str | None = Field(
        default=None, description='"slack:CHANNEL", "slack:CHANNEL:THREAD_TS", '
        '"discord:CHANNEL", or absent: the answer stays in the thread (maiden show)')
    thread: str | None = Field(default=None, description=(
        "one thread for every delivery; default: each delivery its own, "
        "hook:{name}:{delivery}"))
    signature_header: str = Field(default="X-Hub-Signature-256", description=(
        "the header with the body's signature, sha256=<hex> (GitHub's form)"))
    delivery_header: str = Field(default="X-GitHub-Delivery", description=(
        "the header with the sender's id of the delivery (the same when sent again); "
        "absent: the body's digest"))
    max_body_bytes: int = Field(default=1_000_000, ge=1, le=25_000_000,
                                description="a larger body is refused (413)")

    @model_validator(mode="after")
    def _prompt_or_tool(self) -> HookConfig:
        if (self.prompt is None) == (self.tool is None):
            raise ValueError("give one of prompt (the agent is asked) or tool (a tool run, "
                             "its output posted)")
        if self.tool is None and (self.args or self.then_prompt):
            raise ValueError("args and then_prompt go with tool")
        return self


@dataclass(frozen=True, slots=True)
class Hook:
    """A hook as configured, its secret read and its target resolved."""

    config: HookConfig
    secret: bytes
    origin: Origin

    @property
    def name(self) -> str:
        return self.config.name


def load_hooks(configs: Sequence[HookConfig], *, env: Mapping[str, str] | None,
               channels: Sequence[str]) -> list[Hook]:
    """Every hook read and checked; ``ConfigError`` lists each problem by its key.
    ``env``: where the secrets are read (None: not yet, the file alone is checked)."""
    problems: list[tuple[str, str]] = []
    hooks: list[Hook] = []
    seen: set[str] = set()
    for i, config in enumerate(configs):
        where = entry_key("hooks", i, config.name, seen, problems)
        secret = env.get(config.secret_env, "") if env is not None else ""
        if env is not None and not secret:
            problems.append((f"{where}.secret_env", f"the environment variable "
                             f"{config.secret_env!r} is not set (the shared secret)"))
        for key, template in (("prompt", config.prompt), ("then_prompt", config.then_prompt),
                              *((f"args.{k}", v) for k, v in config.args.items())):
            try:
                _filled(template, {})
            except (ValueError, IndexError) as exc:
                problems.append((f"{where}.{key}", f"not a template: {exc}"))
        origin = delivered_to(where, config.deliver, channels, problems)
        if origin is not None:
            hooks.append(Hook(config, secret.encode(), origin))
    if problems:
        raise ConfigError(problems)
    return hooks


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((v for k, v in headers.items() if k.lower() == wanted), None)


def verify(hook: Hook, body: bytes, headers: Mapping[str, str]) -> None:
    """``HookRefused`` unless ``body`` fits the hook's limit and carries a valid signature
    (compared in constant time)."""
    if len(body) > hook.config.max_body_bytes:
        raise HookRefused(413, f"the body is {len(body)} bytes; hook {hook.name!r} takes "
                               f"at most {hook.config.max_body_bytes}")
    given = _header(headers, hook.config.signature_header) or ""
    scheme, _, signature = given.strip().partition("=")
    expected = hmac.new(hook.secret, body, hashlib.sha256).hexdigest()
    if scheme.lower() != "sha256" or not hmac.compare_digest(signature.lower(), expected):
        raise HookRefused(401, f"no valid {hook.config.signature_header} "
                               "(sha256=<HMAC-SHA256 of the body with the hook's secret>)")


_DELIVERY = re.compile(r"^[\x21-\x7e]{1,200}$")


def delivery_of(hook: Hook, body: bytes, headers: Mapping[str, str]) -> str:
    """The sender's id of the delivery (the same when it sends it again), or the body's
    digest when it gives none (or one that is not a short printable token)."""
    given = (_header(headers, hook.config.delivery_header) or "").strip()
    return given if _DELIVERY.match(given) else "sha256:" + hashlib.sha256(body).hexdigest()


def hook_key(name: str, delivery: str) -> str:
    """The run's idempotency key: ``hook:{name}:{digest of the delivery id}``."""
    return f"hook:{name}:{hashlib.sha256(delivery.encode()).hexdigest()[:24]}"


def payload_of(body: bytes, content_type: str | None) -> Any:
    """The payload: JSON, or a form's ``payload`` field holding JSON (GitHub's
    ``application/x-www-form-urlencoded`` choice); anything else as text."""
    text = body.decode("utf-8", errors="replace")
    if (content_type or "").split(";")[0].strip().lower() == \
            "application/x-www-form-urlencoded":
        text = (parse_qs(text).get("payload") or [""])[0]
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Fields(string.Formatter):
    """``{a.b.c}``: the payload's field ``a``, then its ``b``, then ``c`` (a list by its
    index); nothing else of Python's format language reaches into the values."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
                  ) -> tuple[Any, str]:
        if field_name == "payload":
            whole = json.dumps(self.payload, ensure_ascii=False)
            return whole[:PAYLOAD_CHARS], field_name
        value: Any = self.payload
        for part in field_name.split("."):
            if isinstance(value, Mapping):
                value = value.get(part)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                value = None
        if value is None:
            return "", field_name
        return (json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list)
                else value), field_name


def prompt_for(template: str, payload: Any) -> str:
    """The hook's ``prompt`` with the payload's fields put in (``HookConfig.prompt``)."""
    return _Fields(payload).vformat(template, (), {})


async def take(runtime: Runtime, hook: Hook, body: bytes, headers: Mapping[str, str]
               ) -> tuple[Run, bool]:
    """A delivery of ``hook``: checked (``HookRefused``), then one run under the delivery's
    key; True with the run a delivery sent before made (nothing more is run)."""
    verify(hook, body, headers)
    key = hook_key(hook.name, delivery_of(hook, body, headers))
    held = await runtime.records.run_for_key(key)
    if held is not None:
        return held, True
    payload = payload_of(body, _header(headers, "Content-Type"))
    config, job = hook.config, None
    if config.tool is not None:
        then = _filled(config.then_prompt, payload)
        job = Job(tool=config.tool, args=_filled(config.args, payload), then_prompt=then)
        text = then or f"(webhook {hook.name}: {config.tool})"
    else:
        text = prompt_for(config.prompt or "", payload)
    thread = config.thread or f"hook:{hook.name}:{key.rsplit(':', 1)[1]}"
    run = await runtime.submit(thread, text, origin=hook.origin, idempotency_key=key,
                               agent=config.agent, job=job)
    return run, False


def _filled(value: Any, payload: Any) -> Any:
    """``value`` with the payload's fields put in each text in it (``prompt_for``)."""
    if isinstance(value, str):
        return prompt_for(value, payload)
    if isinstance(value, dict):
        return {k: _filled(v, payload) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, payload) for v in value]
    return value
