"""Discord's JSON bodies as data: a small schema language, and the errors tree of a 50035.

A ``Field`` says what one value may be: its kinds, whether it is required, its length (the
characters of a string, trimmed where Discord trims; the items of a list), its range or
choices, the ``Field`` of a list's items or the ``Shape`` of an object's fields. A ``Shape``
is an object's fields plus ``rules`` for what involves several of them (run once its fields
are well typed). ``problems`` walks a value and lists every ``Problem`` at once, as Discord
does; ``invalid_form`` makes the answer: HTTP 400 ``{"code": 50035, "message": "Invalid
Form Body", "errors": {...}}``, where ``errors`` mirrors the body (list indexes as keys) down
to ``{"_errors": [{"code", "message"}]}`` at each faulty field, and a fault of the request as
a whole sits in the top-level ``_errors``
(https://discord.com/developers/docs/reference#error-messages).

The docs show the tree and some codes (``BASE_TYPE_REQUIRED``, ``BASE_TYPE_CHOICES``) and say
a complete list "would be almost instantly out of date"; the other codes here are the ones
Discord answers for the same faults (``BASE_TYPE_MAX_LENGTH``, ``NUMBER_TYPE_COERCE``,
``MODEL_TYPE_CONVERT``...). Tests hold the code and the path; the message is for people.

A ``null`` where a field is optional is taken as absent, as Discord takes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .payloads import JSON
from .store import DiscordError

__all__ = ["Field", "Problem", "Rule", "Shape", "array", "boolean", "errors_tree", "integer",
           "invalid_form", "join", "number", "obj", "problems", "snowflake", "string"]

Kind = Literal["string", "integer", "number", "boolean", "snowflake", "object", "array"]


@dataclass(frozen=True)
class Problem:
    """One fault: where (dotted: ``components.0.components.1.custom_id``; ``""`` for the
    whole body), Discord's code for it, and words for people."""

    path: str
    code: str
    message: str


Rule = Callable[[Any, str], list[Problem]]
"""A check over a whole object (or list): the value and its path -> its problems."""


@dataclass(frozen=True)
class Shape:
    """An object's fields, and rules over several of them."""

    fields: Mapping[str, Field]
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Field:
    """What one value may be."""

    kinds: tuple[Kind, ...]
    required: bool = False
    min_len: int | None = None
    max_len: int | None = None
    trim: bool = False
    """Lengths count the string without leading and trailing whitespace (embeds)."""
    least: float | None = None
    most: float | None = None
    choices: tuple[Any, ...] = ()
    items: Field | None = None
    shape: Shape | None = None
    rules: tuple[Rule, ...] = field(default=())


def string(max_len: int | None = None, *, min_len: int | None = None, required: bool = False,
           trim: bool = False, choices: tuple[str, ...] = ()) -> Field:
    return Field(("string",), required, min_len, max_len, trim, choices=choices)


def integer(*, required: bool = False, least: int | None = None, most: int | None = None,
            choices: tuple[int, ...] = ()) -> Field:
    return Field(("integer",), required, least=least, most=most, choices=choices)


def number(*, required: bool = False) -> Field:
    return Field(("number",), required)


def boolean(*, required: bool = False) -> Field:
    return Field(("boolean",), required)


def snowflake(*, required: bool = False) -> Field:
    return Field(("snowflake",), required)


def array(items: Field | None = None, max_len: int | None = None, *,
          min_len: int | None = None, required: bool = False,
          rules: tuple[Rule, ...] = ()) -> Field:
    return Field(("array",), required, min_len, max_len, items=items, rules=rules)


def obj(shape: Shape | None = None, *, required: bool = False) -> Field:
    return Field(("object",), required, shape=shape)


def join(path: str, key: str | int) -> str:
    return str(key) if not path else f"{path}.{key}"


def problems(spec: Field | Shape, value: Any, path: str = "") -> list[Problem]:
    """Every fault of ``value`` against ``spec`` (a ``Shape`` is an object of that shape)."""
    if isinstance(spec, Shape):
        return _field(Field(("object",), shape=spec), value, path)
    if value is None:
        return [Problem(path, "BASE_TYPE_REQUIRED", "This field is required")] \
            if spec.required else []
    return _field(spec, value, path)


def _field(spec: Field, value: Any, path: str) -> list[Problem]:
    kind = next((k for k in spec.kinds if _is(k, value)), None)
    if kind is None:
        return [_wrong_kind(spec.kinds[0], value, path)]
    found = _size(spec, value, path) + _range(spec, value, path)
    if spec.choices and value not in spec.choices:
        shown = ", ".join(repr(c) if isinstance(c, str) else str(c) for c in spec.choices)
        found.append(Problem(path, "BASE_TYPE_CHOICES", f"Value must be one of ({shown})."))
    if kind == "array" and spec.items is not None:
        for i, item in enumerate(value):
            found += problems(spec.items, item, join(path, i)) if item is not None else [
                Problem(join(path, i), "LIST_ITEM_VALUE_REQUIRED", "List item values are "
                        "required")]
    if kind == "object" and spec.shape is not None:
        for name, sub in spec.shape.fields.items():
            found += problems(sub, value.get(name), join(path, name))
        if not found:
            for rule in spec.shape.rules:
                found += rule(value, path)
    if not found:
        for rule in spec.rules:
            found += rule(value, path)
    return found


def _is(kind: Kind, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "snowflake":
        return (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
            isinstance(value, str) and value.isascii() and value.isdigit())
    if kind == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


def _wrong_kind(kind: Kind, value: Any, path: str) -> Problem:
    return {
        "string": Problem(path, "STRING_TYPE_CONVERT", f'Could not interpret "{value}" as '
                                                       "string."),
        "integer": Problem(path, "NUMBER_TYPE_COERCE", f'Value "{value}" is not int.'),
        "number": Problem(path, "NUMBER_TYPE_COERCE", f'Value "{value}" is not a number.'),
        "boolean": Problem(path, "BOOLEAN_TYPE_CONVERT", "Must be either true or false."),
        "snowflake": Problem(path, "NUMBER_TYPE_COERCE", f'Value "{value}" is not snowflake.'),
        "object": Problem(path, "MODEL_TYPE_CONVERT", "Expected an object/dictionary."),
        "array": Problem(path, "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType."),
    }[kind]


def _size(spec: Field, value: Any, path: str) -> list[Problem]:
    if not isinstance(value, str | list) or (spec.min_len is None and spec.max_len is None):
        return []
    size = len(value.strip() if spec.trim and isinstance(value, str) else value)
    low, high = spec.min_len, spec.max_len
    if low is not None and high is not None and not low <= size <= high:
        return [Problem(path, "BASE_TYPE_BAD_LENGTH",
                        f"Must be between {low} and {high} in length.")]
    if high is not None and size > high:
        return [Problem(path, "BASE_TYPE_MAX_LENGTH", f"Must be {high} or fewer in length.")]
    if low is not None and size < low:
        return [Problem(path, "BASE_TYPE_MIN_LENGTH", f"Must be {low} or more in length.")]
    return []


def _range(spec: Field, value: Any, path: str) -> list[Problem]:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return []
    if spec.most is not None and value > spec.most:
        return [Problem(path, "NUMBER_TYPE_MAX",
                        f"int value should be less than or equal to {spec.most:g}.")]
    if spec.least is not None and value < spec.least:
        return [Problem(path, "NUMBER_TYPE_MIN",
                        f"int value should be greater than or equal to {spec.least:g}.")]
    return []


def errors_tree(found: list[Problem]) -> JSON:
    """The ``errors`` object of a 50035: the body's paths down to ``_errors`` lists."""
    tree: JSON = {}
    for problem in found:
        node = tree
        for part in problem.path.split(".") if problem.path else []:
            node = node.setdefault(part, {})
        node.setdefault("_errors", []).append({"code": problem.code,
                                               "message": problem.message})
    return tree


def invalid_form(found: list[Problem]) -> DiscordError:
    return DiscordError(400, 50035, "Invalid Form Body", errors_tree(found))
