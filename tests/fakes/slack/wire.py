"""How the fake reads a Web API request, as Slack does: GET query strings, form-encoded,
multipart or JSON POST bodies; a ``Bearer`` token, or ``token`` in a form body (never in a
JSON body, nor, any more, in a query string); Slack's warnings (``missing_charset``). What was
received (``Call``) and the failures a test plans (``Fault``)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from .store import JSON, SlackError

__all__ = ["Call", "Fault", "Outage", "parse"]


@dataclass(frozen=True)
class Fault:
    """One planned failure of a method (see ``FakeSlack.fail``)."""

    status: int | None = None
    retry_after: int | None = None
    drop: bool = False
    error: str | None = None


@dataclass(frozen=True)
class Outage:
    """Slack misbehaving for a while (see ``FakeSlack.misbehave``)."""

    mode: str  # "status", "slow" or "down"
    until: float  # time.monotonic()
    status: int = 503
    retry_after: int = 1
    delay_s: float = 2.0


@dataclass(frozen=True)
class Call:
    """One request as the fake received it."""

    method: str
    http_method: str
    params: JSON
    headers: dict[str, str]
    at: float


_JSON_FIELDS = ("blocks", "attachments", "metadata", "loading_messages")


async def parse(request: web.Request) -> tuple[JSON, str | None, list[str]]:
    """Parameters (query and body), the token, and Slack's warnings for this request."""
    params: JSON = dict(request.query)
    params.pop("token", None)  # Slack no longer reads tokens from query strings
    token: str | None = None
    warnings: list[str] = []
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        token = auth.removeprefix("Bearer ").strip()
    ctype = request.content_type
    if ctype == "multipart/form-data":
        form: dict[str, Any] = {k: v for k, v in (await request.post()).items()
                                if isinstance(v, str)}
        token = token or form.get("token")
        form.pop("token", None)
        params.update(form)
    elif raw := await request.read():
        if ctype == "application/json":
            if request.charset is None:
                warnings.append("missing_charset")
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise SlackError("invalid_json") from exc
            if not isinstance(body, dict):
                raise SlackError("json_not_object")
            body.pop("token", None)  # a JSON body's token is ignored: it must be the header
            params.update(body)
        elif ctype == "application/x-www-form-urlencoded":
            form = dict(parse_qsl(raw.decode(), keep_blank_values=True))
            token = token or form.get("token")
            form.pop("token", None)
            params.update(form)
        else:
            raise SlackError("invalid_form_data")
    for name in _JSON_FIELDS:
        if isinstance(params.get(name), str):
            with contextlib.suppress(ValueError):  # the method answers for bad JSON
                params[name] = json.loads(params[name])
    return params, token, warnings
