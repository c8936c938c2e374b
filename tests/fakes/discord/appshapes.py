"""The bodies of an app's own calls, as ``schema`` shapes: interaction responses (each
callback type's ``data``) and application commands (names, descriptions, options, limits).

Which callback types an interaction may take depends on the interaction (6 and 7 only for
components, 8 only for autocomplete): that needs the interaction, so ``interactions.py``
checks it; what the body alone decides is here.
"""

from __future__ import annotations

from typing import Any

from .schema import (
    Field,
    Problem,
    Shape,
    array,
    boolean,
    integer,
    join,
    number,
    obj,
    problems,
    snowflake,
    string,
)
from .shapes import EPHEMERAL, RESPONSE_MESSAGE

PONG, MESSAGE, DEFERRED, DEFERRED_UPDATE, UPDATE, AUTOCOMPLETE, MODAL = 1, 4, 5, 6, 7, 8, 9
CALLBACK_TYPES = (1, 4, 5, 6, 7, 8, 9, 10, 12)
"""RESPONDING#interaction-response-object-interaction-callback-type."""

CHOICE = Shape({"name": string(100, min_len=1, required=True), "name_localizations": obj(),
                "value": Field(("string", "integer", "number"), required=True, max_len=100)})
"""COMMANDS#application-command-object-application-command-option-choice-structure."""

_DATA: dict[int, Shape] = {
    MESSAGE: RESPONSE_MESSAGE,
    UPDATE: RESPONSE_MESSAGE,
    # "the only valid message flag you may use is EPHEMERAL"
    DEFERRED: Shape({"flags": integer(least=0, choices=(0, EPHEMERAL))}),
    AUTOCOMPLETE: Shape({"choices": array(obj(CHOICE), 25, required=True)}),
    MODAL: Shape({"custom_id": string(100, min_len=1, required=True),
                  "title": string(45, required=True),
                  "components": array(obj(), 5, min_len=1, required=True)}),
}


def _callback_data(body: dict[str, Any], path: str) -> list[Problem]:
    shape = _DATA.get(body["type"])
    data = body.get("data")
    if shape is None:
        return []
    if data is None and body["type"] in (AUTOCOMPLETE, MODAL):
        return [Problem(join(path, "data"), "BASE_TYPE_REQUIRED", "This field is required")]
    return problems(shape, data or {}, join(path, "data"))


CALLBACK = Shape({"type": integer(required=True, choices=CALLBACK_TYPES), "data": obj()},
                 rules=(_callback_data,))
"""RESPONDING#interaction-response-object."""


def response_carries_a_message(body: Any, files: int) -> bool:
    """A type 4 response posts a message, so it needs something in it."""
    if not isinstance(body, dict) or body.get("type") != MESSAGE:
        return True
    data = body.get("data") or {}
    return bool(files or any(data.get(k) for k in ("content", "embeds", "components",
                                                    "poll", "attachments")))


# -- application commands

def _named(item: dict[str, Any], path: str) -> list[Problem]:
    """COMMANDS#application-command-object-application-command-naming: a CHAT_INPUT name (and
    its options') is letters, numbers, ``-_'``, lowercase where a letter has a lowercase."""
    name = item["name"]
    if all(c.isalnum() or c in "-_'" for c in name) and name == name.lower():
        return []
    return [Problem(join(path, "name"), "STRING_TYPE_REGEX",
                    "String value did not match validation regex.")]


def _options(options: list[dict[str, Any]], path: str) -> list[Problem]:
    """Option names unique; required options before optional ones; no autocomplete with
    choices (COMMANDS#application-command-object-application-command-option-structure)."""
    found: list[Problem] = []
    names = [o["name"] for o in options]
    for i, o in enumerate(options):
        at = join(path, i)
        found += _named(o, at)
        if o["name"] in names[:i]:
            found.append(Problem(join(at, "name"), "APPLICATION_COMMAND_OPTION_NAME_ALREADY_"
                                 "EXISTS", "Option names must be unique"))
        if not o.get("required") and any(p.get("required") for p in options[i + 1:]):
            found.append(Problem(at, "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                                 "Required options must be placed before non-required "
                                 "options"))
        if o.get("autocomplete") and o.get("choices"):
            found.append(Problem(join(at, "autocomplete"), "AUTOCOMPLETE_WITH_CHOICES",
                                 "Autocomplete cannot be set when there are choices."))
    return found


def _option(depth: int) -> Shape:
    fields: dict[str, Field] = {
        "type": integer(required=True, choices=tuple(range(1, 12))),
        "name": string(32, min_len=1, required=True), "name_localizations": obj(),
        "description": string(100, min_len=1, required=True),
        "description_localizations": obj(), "required": boolean(),
        "choices": array(obj(CHOICE), 25), "channel_types": array(integer()),
        "min_value": number(), "max_value": number(),
        "min_length": integer(least=0, most=6000), "max_length": integer(least=1, most=6000),
        "autocomplete": boolean(),
    }
    if depth:  # subcommand groups hold subcommands, which hold options
        fields["options"] = array(obj(_option(depth - 1)), 25, rules=(_options,))
    return Shape(fields)


def _chat_input(command: dict[str, Any], path: str) -> list[Problem]:
    if command.get("type", 1) != 1:
        return []
    found = _named(command, path)
    if not 1 <= len(command.get("description") or "") <= 100:
        found.append(Problem(join(path, "description"), "BASE_TYPE_BAD_LENGTH",
                             "Must be between 1 and 100 in length."))
    return found


COMMAND = Shape({
    "id": snowflake(), "type": integer(choices=(1, 2, 3, 4)),
    "name": string(32, min_len=1, required=True), "name_localizations": obj(),
    "description": string(100), "description_localizations": obj(),
    "options": array(obj(_option(2)), 25, rules=(_options,)),
    "default_member_permissions": string(), "dm_permission": boolean(),
    "default_permission": boolean(), "integration_types": array(integer(choices=(0, 1))),
    "contexts": array(integer(choices=(0, 1, 2))), "nsfw": boolean(), "handler": integer(),
}, rules=(_chat_input,))
"""COMMANDS#bulk-overwrite-guild-application-commands-json-params."""

_MOST = {1: 100, 2: 15, 3: 15, 4: 1}
"""COMMANDS#registering-a-command: 100 CHAT_INPUT, 15 USER, 15 MESSAGE, 1 PRIMARY_ENTRY_POINT
(globally, and as many per guild)."""


def _command_list(commands: list[dict[str, Any]], path: str) -> list[Problem]:
    found: list[Problem] = []
    for kind, most in _MOST.items():
        if sum(c.get("type", 1) == kind for c in commands) > most:
            found.append(Problem(path, "APPLICATION_COMMANDS_TOO_MANY",
                                 f"Maximum number of application commands of type {kind} "
                                 f"reached ({most})"))
    seen: set[tuple[int, str]] = set()
    for i, c in enumerate(commands):
        key = (c.get("type", 1), c["name"])
        if key in seen:
            found.append(Problem(join(join(path, i), "name"),
                                 "APPLICATION_COMMANDS_DUPLICATE_NAME",
                                 "Application command names must be unique"))
        seen.add(key)
    return found


COMMAND_LIST = array(obj(COMMAND), required=True, rules=(_command_list,))
