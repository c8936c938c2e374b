"""The ``agent.toml`` reference: every key of the pydantic config models, with its type,
default and description, walked from ``MaidenConfig`` in the order the models declare them.

A model met a second time (``[agents.budget]`` is ``[budget]``'s model) is not listed
again: its key points at the table where it is. A model that extends another (an
``[[agents]]`` table takes every ``[agent]`` key) lists only the keys it adds.
"""

from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from runtime import PROCESS_WIDE, AgentEntry

from ..config import MaidenConfig

__all__ = ["Key", "Table", "missing_descriptions", "render", "tables"]

NOT_INHERITED: dict[type[BaseModel], tuple[str, ...]] = {AgentEntry: PROCESS_WIDE}
"""Keys of a base table that a model extending it refuses (they hold for the process)."""

INTRO = """\
Every key is optional unless its default says *required*. Unknown keys and values of the
wrong type are errors, each named in one line (`agent.toml: agent.max_turns: Input should
be a valid integer ...`). Relative paths are relative to the config file's folder.
Secrets never go in the file: a key ending in `_env` names the environment variable that
holds the secret.
"""


@dataclass(frozen=True, slots=True)
class Key:
    """One key: its dotted path (``agents[].name``), name, type, default and description."""

    path: str
    name: str
    type: str
    default: str
    description: str


@dataclass(slots=True)
class Table:
    """One TOML table (``[agent]``) or array of tables (``[[agents]]``) and its keys."""

    path: str
    array: bool
    model: type[BaseModel]
    doc: str
    keys: list[Key] = field(default_factory=list)
    base: str | None = None  # the table whose keys it takes as well

    @property
    def heading(self) -> str:
        return f"[[{self.path}]]" if self.array else f"[{self.path}]"

    @property
    def anchor(self) -> str:
        return _anchor(self.path)


def tables(root: type[BaseModel] = MaidenConfig) -> list[Table]:
    """Every table under ``root``, in the order of the file's sections."""
    found: list[Table] = []
    seen: dict[type[BaseModel], Table] = {}

    def walk(model: type[BaseModel], path: str, array: bool, key_path: str) -> None:
        table = Table(path, array, model, _doc(model))
        if path:
            found.append(table)
        seen[model] = table
        base = _documented_base(model, seen)
        if base is not None:
            table.base = base.heading
        own = _own_fields(model, base.model if base is not None else None)
        for name, info in model.model_fields.items():
            if name not in own:
                continue
            key = info.alias or name
            sub, many = _submodel(info.annotation)
            where = f"{path}.{key}" if path else key
            at = f"{key_path}.{key}" if key_path else key
            if sub is not None and not _shown_at_top(sub, seen):
                walk(sub, where, many, at + ("[]" if many else ""))
            else:
                table.keys.append(Key(at, key, _type(info.annotation, seen), _default(info),
                                      _text(info.description or "")))

    walk(root, "", False, "")
    return found


def missing_descriptions(root: type[BaseModel] = MaidenConfig) -> list[str]:
    """The keys (dotted paths) whose model gives no description."""
    return [key.path for table in tables(root) for key in table.keys if not key.description]


def render(root: type[BaseModel] = MaidenConfig) -> str:
    """The reference page, Markdown."""
    out = ["# agent.toml", "", INTRO]
    for table in tables(root):
        if not table.keys:
            continue  # a table of tables ([channels]): its own are listed
        out += [f"## `{table.heading}` {{#{table.anchor}}}", ""]
        if table.doc:
            out += [table.doc, ""]
        if table.base is not None:
            refused = NOT_INHERITED.get(table.model, ())
            but = f", except {', '.join(f'`{k}`' for k in refused)} (set for the whole " \
                f"process, in `{table.base}` only)" if refused else ""
            out += [f"Every key of [`{table.base}`](#{_anchor(table.base)}){but}, and these:", ""]
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        out += [f"| `{k.name}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.description)} |"
                for k in table.keys]
        out.append("")
    return "\n".join(out)


def _anchor(heading: str) -> str:
    return heading.strip("[]").replace(".", "-").replace("_", "-")


def _own_fields(model: type[BaseModel], base: type[BaseModel] | None) -> set[str]:
    """The fields to list: all, or those ``model`` declares over a documented ``base``."""
    if base is None:
        return set(model.model_fields)
    declared = inspect.get_annotations(model)
    return {n for n in model.model_fields if n in declared or n not in base.model_fields}


def _shown_at_top(model: type[BaseModel], seen: dict[type[BaseModel], Table]) -> bool:
    """Whether ``model`` is a top-level section already listed (``[budget]``): a key
    holding it elsewhere points there instead of listing its keys again."""
    table = seen.get(model)
    return table is not None and bool(table.path) and "." not in table.path


def _documented_base(model: type[BaseModel],
                     seen: dict[type[BaseModel], Table]) -> Table | None:
    for base in model.__mro__[1:]:
        if base in seen and seen[base].path:
            return seen[base]
    return None


def _submodel(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a key holds (``X``, ``X | None``, ``list[X]``) and whether it is a list;
    ``(None, False)`` for a value, or a union of a model with something else."""
    if _is_model(annotation):
        return annotation, False
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is list and args and _is_model(args[0]):
        return args[0], True
    if _is_union(annotation) and len(args) == 1 and _is_model(args[0]):
        return args[0], False
    return None, False


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _type(annotation: Any, seen: dict[type[BaseModel], Table]) -> str:
    if _is_union(annotation):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return " or ".join(_type(a, seen) for a in args)
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(f'`"{v}"`' if isinstance(v, str) else f"`{v}`"
                                     for v in get_args(annotation))
    if origin is list:
        inner = get_args(annotation)[0]
        if _is_model(inner):
            return "array of " + _type(inner, seen).replace("table:", "tables:", 1)
        return f"array of {_plural(_type(inner, seen))}"
    if origin is dict:
        return f"table of {_plural(_type(get_args(annotation)[1], seen))}"
    if _is_model(annotation):
        table = seen.get(annotation)
        return f"table: [`{table.heading}`](#{table.anchor})'s keys" if table else "table"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _plural(kind: str) -> str:
    if kind.startswith("one of "):
        return kind.replace("one of ", "values among ", 1)
    return f"{kind}s" if kind in ("string", "integer", "number", "boolean") else kind


def _default(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        value = info.default
    elif info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        value = PydanticUndefined
    text = "*required*" if value is PydanticUndefined else \
        "unset" if value is None else f"`{_toml(value)}`"
    bounds = _bounds(info)
    return f"{text}; {bounds}" if bounds else text


def _bounds(info: FieldInfo) -> str:
    parts: list[str] = []
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            parts.append(f"≥ {_number(item.ge)}")
        elif isinstance(item, annotated_types.Gt):
            parts.append(f"> {_number(item.gt)}")
        elif isinstance(item, annotated_types.Le):
            parts.append(f"≤ {_number(item.le)}")
        elif isinstance(item, annotated_types.Lt):
            parts.append(f"< {_number(item.lt)}")
        elif isinstance(item, annotated_types.MinLen) and item.min_length > 1:
            parts.append(f"at least {item.min_length} items")
        elif isinstance(item, annotated_types.MinLen):
            parts.append("not empty")
        elif isinstance(item, annotated_types.MaxLen):
            parts.append(f"at most {item.max_length} long")
        elif getattr(item, "pattern", None):
            parts.append(f"matches `{item.pattern}`")
    return ", ".join(parts)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, BaseModel):
        return "{}"
    return _number(value)


def _number(value: Any) -> str:
    """``1_000_000`` (TOML's own spelling) for a large whole number."""
    return f"{value:_}" if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _doc(model: type[BaseModel]) -> str:
    """The model's docstring, its first paragraph, unless it only names the table."""
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    text = _text(doc)
    heading = r"`\[\[?[\w.<>*]+\]\]?`"
    if re.fullmatch(rf"(One )?{heading}( table| entry)?\.?", text):
        return ""
    text = re.sub(rf"^{heading}: ", "", text)
    return text[:1].upper() + text[1:]


def _text(text: str) -> str:
    """One line, with reST's double backquotes as Markdown's single ones."""
    return " ".join(text.replace("``", "`").split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
