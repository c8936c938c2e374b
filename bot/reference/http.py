"""The HTTP API reference, from the OpenAPI schema of the app ``maiden run`` serves: the
app is built here over a runtime that is never started (its store is never opened), with
a token configured, and its schema read without serving anything."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from channels.http import HttpConfig
from runtime import EchoProvider, Runtime, SQLiteStore

__all__ = ["render", "schema"]

INTRO = """\
What `maiden run` serves on `[http] host:port` ([`[http]`](config.md#http)), from the
OpenAPI schema it serves itself at `/openapi.json` (for any OpenAPI viewer). This page is
built with a token configured: without one, no route asks for it and the `401` answers
are left out. Limits shown (a message's length, say) are the defaults'. Errors are
`application/problem+json` with a `code`, except on the OpenAI wire (`/v1/models`,
`/v1/chat/completions`, `/v1/responses`), whose errors take OpenAI's shape.
"""

TAGS = {"threads": "Threads and messages", "runs": "Runs and approvals",
        "schedules": "Schedules", "feedback": "Feedback", "files": "Files",
        "service": "Health and metrics", "openai": "The OpenAI wire"}


def schema() -> dict[str, Any]:
    """The OpenAPI schema of the HTTP API with its default settings and a token."""
    from channels.http.app import create_app  # FastAPI loads here, not on import

    # Never opened: the app only asks the runtime for its settings while it is built.
    runtime = Runtime(SQLiteStore(Path("unopened.db")), EchoProvider())
    return create_app(runtime, HttpConfig(), token="reference").openapi()


def render(spec: dict[str, Any] | None = None) -> str:
    """The reference page, Markdown."""
    spec = spec or schema()
    out = ["# HTTP API", "", INTRO]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    out += ["| route | what it does |", "|---|---|"]
    for operations in by_tag.values():
        out += [f"| [`{m.upper()} {p}`](#{_op_anchor(m, p)}) | {_cell(_first_line(op))} |"
                for m, p, op in operations]
    out.append("")
    for tag, operations in by_tag.items():
        out += [f"## {TAGS.get(tag, tag.capitalize())}", ""]
        for method, path, op in operations:
            out += _operation(method, path, op)
    out += ["## Schemas", ""]
    for name, body in spec.get("components", {}).get("schemas", {}).items():
        out += _schema(name, body)
    return "\n".join(out)


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    out = [f"### `{method.upper()} {path}` {{#{_op_anchor(method, path)}}}", ""]
    if op.get("description"):
        out += [_prose(op["description"]), ""]
    if not op.get("security"):
        out += ["No token needed.", ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | description |", "|---|---|---|---|"]
        for p in params:
            needed = "" if p.get("required") else " (optional)"
            text = _text(p.get("description") or p.get("schema", {}).get("description", ""))
            if "default" in p.get("schema", {}):
                text = f"{text} (default `{_json(p['schema']['default'])}`)".lstrip()
            out.append(f"| `{p['name']}` | {p['in']}{needed} | {_cell(_type(p['schema']))} "
                       f"| {_cell(text)} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        kinds = [f"`{kind}` {_type(c.get('schema', {}))}" for kind, c in body["content"].items()]
        out += [f"Body{'' if body.get('required') else ' (optional)'}: "
                + "; or ".join(kinds) + ".", ""]
    out += ["| status | meaning | body |", "|---|---|---|"]
    for status, answer in op.get("responses", {}).items():
        kinds = [f"`{kind}` {_type(c.get('schema', {}))}".rstrip()
                 for kind, c in answer.get("content", {}).items()]
        out.append(f"| {status} | {_cell(_text(answer.get('description', '')))} "
                   f"| {_cell('; '.join(kinds))} |")
    out.append("")
    return out


def _schema(name: str, body: dict[str, Any]) -> list[str]:
    out = [f"### {name} {{#{_schema_anchor(name)}}}", ""]
    if body.get("description"):
        out += [_prose(body["description"]), ""]
    if "enum" in body:
        out += ["One of " + ", ".join(f"`{v}`" for v in body["enum"]) + ".", ""]
        return out
    properties = body.get("properties", {})
    if not properties:
        out += [f"{_type(body)}.", ""]
        return out
    required = set(body.get("required", []))
    out += ["| field | type | description |", "|---|---|---|"]
    for field, prop in properties.items():
        text = _text(prop.get("description", ""))
        if field not in required:
            default = f"; default `{_json(prop['default'])}`" if "default" in prop else ""
            text = f"(optional{default}) {text}".strip()
        out.append(f"| `{field}` | {_cell(_type(prop))} | {_cell(text)} |")
    out.append("")
    if body.get("additionalProperties") is True:
        out += ["Other fields are accepted, and ignored.", ""]
    return out


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema as a few words, its references as links."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{_schema_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(_type(s) for s in schema[key]))
    if "const" in schema:
        return f"`{_json(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{_json(v)}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items") or {}
        return f"array of {_type(items)}" if items else "array"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    if kind is None:
        return "any"
    return str(kind) + _limits(schema)


def _limits(schema: dict[str, Any]) -> str:
    parts = []
    for key, word in (("minLength", "at least {} characters"),
                      ("maxLength", "at most {} characters"), ("minimum", "≥ {}"),
                      ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"),
                      ("pattern", "matching `{}`")):
        if key in schema:
            parts.append(word.format(_number(schema[key])))
    return f" ({', '.join(parts)})" if parts else ""


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _first_line(op: dict[str, Any]) -> str:
    text = _prose(op.get("description") or op.get("summary", ""))
    return re.split(r"(?<=\.)\s", text.split("\n\n")[0], maxsplit=1)[0].rstrip(".")


def _prose(text: str) -> str:
    """A docstring's paragraphs, each on one line, reST's double backquotes as single."""
    return "\n\n".join(_text(p) for p in text.split("\n\n"))


def _text(text: str) -> str:
    return " ".join(text.replace("``", "`").split())


def _op_anchor(method: str, path: str) -> str:
    return "-".join([method, *re.findall(r"[a-z0-9]+", path.lower())])


def _schema_anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
