"""What a tool call hands back: its output, the files and images in it, described for the
model, and the JSON error a failed call gives the model instead."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

__all__ = [
    "ErrorType",
    "ToolFile",
    "ToolImage",
    "ToolOutput",
    "error_result",
    "jsonable",
    "split_files",
]

ErrorType = Literal["exception", "timeout", "invalid_arguments", "unknown_tool", "denied",
                    "cancelled", "loop_detected", "too_many_calls"]


@dataclass(frozen=True, slots=True)
class ToolFile:
    """A file a tool hands back (a CSV it built, a chart): return one, or put it anywhere
    in the result (a list, a dict's value). It is stored once by its content and sent to
    the person with the run's answer; the model is told its name, type and size."""

    name: str
    media_type: str
    data: bytes

    def described(self) -> dict[str, Any]:
        """What the model sees of it in the call's result."""
        return {"file": self.name, "media_type": self.media_type, "size": len(self.data),
                "note": "sent to the person with your answer"}


@dataclass(frozen=True, slots=True)
class ToolImage:
    """An image a tool shows the model (an MCP tool's ``ImageContent``, a screenshot): put
    it in the result like a ``ToolFile``. A model that sees images is shown it with the
    result; it is not sent to the person."""

    media_type: str
    data: bytes

    def described(self) -> dict[str, Any]:
        return {"type": "image", "media_type": self.media_type, "size": len(self.data),
                "note": "shown to you with this result"}


@dataclass(frozen=True, slots=True)
class ToolOutput:
    content: Any
    is_error: bool = False
    files: tuple[ToolFile, ...] = ()
    """Files the result handed back (in ``content``, each is described instead)."""
    images: tuple[ToolImage, ...] = ()
    """Images the result shows the model (described in ``content`` too)."""


def jsonable(value: Any) -> Any:
    """A tool's result as JSON, any ``ToolFile`` or ``ToolImage`` in it left as it is
    (``split_files``)."""
    if not _has_file(value):
        return to_jsonable_python(value)
    if isinstance(value, ToolFile | ToolImage):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return [jsonable(v) for v in value]


def split_files(value: Any) -> ToolOutput:
    """``value`` with each ``ToolFile`` and ``ToolImage`` in it described, and them, in
    order."""
    files: list[ToolFile] = []
    images: list[ToolImage] = []
    content = _described(value, files, images)
    return ToolOutput(content, files=tuple(files), images=tuple(images))


def _described(item: Any, files: list[ToolFile], images: list[ToolImage]) -> Any:
    # A function of its own, not a closure: a closure that calls itself is a reference
    # cycle, left to the garbage collector at every tool call.
    if isinstance(item, ToolFile):
        files.append(item)
        return item.described()
    if isinstance(item, ToolImage):
        images.append(item)
        return item.described()
    if isinstance(item, dict):
        return {k: _described(v, files, images) for k, v in item.items()}
    if isinstance(item, list):
        return [_described(v, files, images) for v in item]
    return item


def _has_file(value: Any) -> bool:
    if isinstance(value, ToolFile | ToolImage):
        return True
    if isinstance(value, Mapping):
        return any(_has_file(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_file(v) for v in value)
    return False


def error_result(type_: ErrorType, message: str) -> ToolOutput:
    """The JSON error a failed call hands back to the model (DESIGN §2)."""
    return ToolOutput({"error": {"type": type_, "message": message}}, is_error=True)

