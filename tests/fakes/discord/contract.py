"""Discord's REST contract: one entry per route the fake serves, read from the reference.

``CONTRACT`` is the table. An ``Endpoint`` is a route as discord.py's ``Route`` names it
(method and path template), the reference page it came from, whether it wants the bot token
and is bound by the global rate limit, its body (``schema`` shapes from ``shapes.py`` and
``appshapes.py``: required fields, types, limits), its query, what an empty message is on it,
and the JSON error codes the docs give for it (besides ``COMMON``).

``check`` applies an entry to a request before the fake's handler sees it: a body or query
against its shape answers ``400 {"code": 50035, "message": "Invalid Form Body", "errors":
...}``; a message with nothing in it ``400 {"code": 50006, "message": "Cannot send an empty
message"}``; a file over 10 MiB ``413 {"code": 40005}``
(https://discord.com/developers/docs/topics/opcodes-and-status-codes#json). What needs the
fake's state (an unknown channel, someone else's message, an interaction answered twice) the
handlers check, with the codes listed here. The router answers a served route that has no
entry with ``404 {"code": 0, "message": "404: Not Found"}``, and notes it as uncovered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .appshapes import CALLBACK, COMMAND_LIST, response_carries_a_message
from .payloads import JSON
from .schema import Field, Problem, Shape, boolean, integer, invalid_form, problems, snowflake
from .shapes import (
    COMMANDS,
    CREATE_MESSAGE,
    DOCS,
    EDIT_MESSAGE,
    EDIT_WEBHOOK_MESSAGE,
    EXECUTE_WEBHOOK,
    MESSAGE,
    RESPONDING,
)
from .store import DiscordError

__all__ = ["COMMON", "CONTRACT", "Endpoint", "check", "entry"]

COMMON = (0, 50035, 50109, 40005)
"""Any route: general error (401, 404), invalid form body, invalid JSON, too large."""

FILE_LIMIT = 10 * 1024 * 1024
"""reference#uploading-files: "The default limit is 10 MiB" per file."""
_FILE_PART = re.compile(r"files\[(\d+)\]\Z")

Filled = Callable[[Any, int], bool]
"""Whether a body (and so many files) has something to show: else 50006."""


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    """The template as discord.py's ``Route`` names it."""
    doc: str
    body: Field | None = None
    query: Shape | None = None
    errors: tuple[int, ...] = ()
    filled: Filled | None = None
    auth: bool = True
    """The bot token is wanted (interaction and webhook-token routes take none)."""
    global_limit: bool = True
    """Bound by the global rate limit ("Interaction endpoints are not": topics/rate-limits)."""


def _one_of(*names: str) -> Filled:
    def filled(body: Any, files: int) -> bool:
        if not isinstance(body, dict):
            return bool(files)
        forward = (body.get("message_reference") or {}).get("type") == 1
        return bool(files or forward or any(body.get(n) for n in names))
    return filled


def _one_anchor(query: JSON, path: str) -> list[Problem]:
    anchors = [k for k in ("around", "before", "after") if query.get(k) is not None]
    return [Problem("", "BASE_TYPE_INVALID", "around, before and after are mutually "
                                             "exclusive")] if len(anchors) > 1 else []


_HISTORY = Shape({"limit": integer(least=1, most=100), "around": snowflake(),
                  "before": snowflake(), "after": snowflake()}, rules=(_one_anchor,))
_WEBHOOK_QUERY = Shape({"wait": boolean(), "thread_id": snowflake(),
                        "with_components": boolean()})
_CHANNEL = "/channels/{channel_id}"
_MESSAGE = _CHANNEL + "/messages/{message_id}"
_REACTION = _MESSAGE + "/reactions/{emoji}/@me"
_WEBHOOK = "/webhooks/{webhook_id}/{webhook_token}"
_HOOKED = _WEBHOOK + "/messages/{message_id}"
_GUILD_COMMANDS = "/applications/{application_id}/guilds/{guild_id}/commands"
_APP_COMMANDS = "/applications/{application_id}/commands"

CONTRACT: tuple[Endpoint, ...] = (
    Endpoint("GET", "/users/@me", DOCS + "resources/user#get-current-user"),
    Endpoint("GET", "/users/{user_id}", DOCS + "resources/user#get-user", errors=(10013,)),
    Endpoint("POST", "/users/@me/channels", DOCS + "resources/user#create-dm",
             body=Field(("object",), shape=Shape({"recipient_id": snowflake(required=True)}))),
    Endpoint("GET", "/gateway/bot", DOCS + "events/gateway#get-gateway-bot"),
    Endpoint("GET", "/oauth2/applications/@me",
             DOCS + "topics/oauth2#get-current-bot-application-information"),
    Endpoint("GET", "/applications/@me", DOCS + "resources/application#get-current-application"),
    Endpoint("GET", _CHANNEL, DOCS + "resources/channel#get-channel", errors=(10003,)),
    Endpoint("POST", _CHANNEL + "/typing", DOCS + "resources/channel#trigger-typing-indicator",
             errors=(10003,)),
    Endpoint("GET", _CHANNEL + "/messages", MESSAGE + "#get-channel-messages", query=_HISTORY,
             errors=(10003,)),
    Endpoint("POST", _CHANNEL + "/messages", MESSAGE + "#create-message",
             body=Field(("object",), shape=CREATE_MESSAGE), errors=(10003, 50006),
             filled=_one_of("content", "embeds", "sticker_ids", "components", "poll",
                            "shared_client_theme")),
    Endpoint("GET", _MESSAGE, MESSAGE + "#get-channel-message", errors=(10003, 10008)),
    Endpoint("PATCH", _MESSAGE, MESSAGE + "#edit-message",
             body=Field(("object",), shape=EDIT_MESSAGE), errors=(10003, 10008, 50005, 50006)),
    Endpoint("DELETE", _MESSAGE, MESSAGE + "#delete-message", errors=(10003, 10008)),
    Endpoint("PUT", _REACTION, MESSAGE + "#create-reaction", errors=(10003, 10008, 10014)),
    Endpoint("DELETE", _REACTION, MESSAGE + "#delete-own-reaction",
             errors=(10003, 10008, 10014)),
    Endpoint("PUT", _GUILD_COMMANDS, COMMANDS + "#bulk-overwrite-guild-application-commands",
             body=COMMAND_LIST, errors=(10004,)),
    Endpoint("GET", _GUILD_COMMANDS, COMMANDS + "#get-guild-application-commands",
             errors=(10004,)),
    Endpoint("PUT", _APP_COMMANDS, COMMANDS + "#bulk-overwrite-global-application-commands",
             body=COMMAND_LIST),
    Endpoint("GET", _APP_COMMANDS, COMMANDS + "#get-global-application-commands"),
    Endpoint("POST", "/interactions/{webhook_id}/{webhook_token}/callback",
             RESPONDING + "#create-interaction-response", body=Field(("object",),
                                                                     shape=CALLBACK),
             query=Shape({"with_response": boolean()}), errors=(10062, 40060, 50006),
             filled=response_carries_a_message, auth=False, global_limit=False),
    Endpoint("POST", _WEBHOOK, RESPONDING + "#create-followup-message",
             body=Field(("object",), shape=EXECUTE_WEBHOOK), query=_WEBHOOK_QUERY,
             errors=(10015, 50006), filled=_one_of("content", "embeds", "components", "poll"),
             auth=False, global_limit=False),
    Endpoint("GET", _HOOKED, RESPONDING + "#get-followup-message", errors=(10015, 10008),
             query=_WEBHOOK_QUERY, auth=False, global_limit=False),
    Endpoint("PATCH", _HOOKED, RESPONDING + "#edit-followup-message",
             body=Field(("object",), shape=EDIT_WEBHOOK_MESSAGE), query=_WEBHOOK_QUERY,
             errors=(10015, 10008, 50006), auth=False, global_limit=False),
    Endpoint("DELETE", _HOOKED, RESPONDING + "#delete-followup-message", query=_WEBHOOK_QUERY,
             errors=(10015, 10008), auth=False, global_limit=False),
)

_BY_ROUTE = {(e.method, e.path): e for e in CONTRACT}


def entry(method: str, path: str) -> Endpoint | None:
    """The contract's entry for a route template, if it has one."""
    return _BY_ROUTE.get((method, path))


def check(endpoint: Endpoint, body: Any, files: list[JSON], query: dict[str, str]
          ) -> DiscordError | None:
    """What Discord answers a request that breaks the entry, or None if it keeps it."""
    for upload in files:
        if int(upload.get("size", 0)) > FILE_LIMIT:
            return DiscordError(413, 40005, "Request entity too large")
    found = _uploads(files)
    if endpoint.query is not None:
        found += problems(endpoint.query, _typed(endpoint.query, query))
    if endpoint.body is not None:
        empty: Any = {} if endpoint.body.kinds == ("object",) else None
        found += problems(endpoint.body, empty if body is None else body)
    if found:
        return invalid_form(found)
    if endpoint.filled is not None and not endpoint.filled(body or {}, len(files)):
        return DiscordError(400, 50006, "Cannot send an empty message")
    return None


def _uploads(files: list[JSON]) -> list[Problem]:
    """reference#uploading-files: each file part is named ``files[n]``, each name once."""
    found, seen = [], set()
    for upload in files:
        name = str(upload.get("_field", ""))
        if not _FILE_PART.match(name) or name in seen:
            found.append(Problem(name or "files", "BASE_TYPE_INVALID",
                                 "File parts are named files[n], each n once."))
        seen.add(name)
    return found


_TRUE, _FALSE = ("True", "true", "1"), ("False", "false", "0")


def _typed(shape: Shape, query: dict[str, str]) -> JSON:
    """Query strings as the JSON values the shape describes (reference#boolean-query-
    strings: ``True``/``true``/``1`` and ``False``/``false``/``0``)."""
    out: JSON = {}
    for key, raw in query.items():
        spec = shape.fields.get(key)
        kinds = spec.kinds if spec is not None else ()
        value: Any = raw
        if "boolean" in kinds and raw in _TRUE + _FALSE:
            value = raw in _TRUE
        elif "integer" in kinds and raw.lstrip("-").isdigit():
            value = int(raw)
        out[key] = value
    return out
