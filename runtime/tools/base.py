"""Tools: Python functions the model may call, described by their type hints.

    @tool(effect="idempotent_write", timeout_s=10)
    async def create_ticket(ctx: ToolContext, title: str, priority: int = 3) -> dict:
        '''Open a ticket in the tracker.'''
        ...

The parameters (minus the optional ``ToolContext`` one) become the JSON schema the
model sees; the arguments it sends are validated against them before the call.

A tool described elsewhere (an MCP server's) comes with its JSON schema instead:
``Tool.from_schema(name, description, schema, call)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from ..errors import ToolDefinitionError, ToolFailure
from ..model.runs import Origin
from ..model.toolspec import ToolSpec
from .keeping import Keeper
from .needs import needed
from .output import (
    ErrorType,
    ToolFile,
    ToolImage,
    ToolOutput,
    error_result,
    jsonable,
    split_files,
)
from .prelude import Prelude

__all__ = [
    "NOT_DONE",
    "CancelFlag",
    "Effect",
    "ErrorType",
    "Tool",
    "ToolContext",
    "ToolFile",
    "ToolImage",
    "ToolOutput",
    "ToolSpec",
    "error_result",
    "split_files",
    "tool",
]

Effect = Literal["read_only", "idempotent_write", "non_idempotent"]


class _NotDone:
    def __repr__(self) -> str:
        return "NOT_DONE"


NOT_DONE: Any = _NotDone()
"""What a ``reconcile`` hook returns when the effect did not happen (so the call runs)."""


class CancelFlag:
    """Whether a call was given up: ``threading.Event``'s ``is_set``, ``wait`` and ``set``,
    on one lock, held until it is set. (An ``Event`` builds a ``Condition``, whose making
    raises and catches three ``AttributeError``s: the most of a fast call's cost.)"""

    __slots__ = ("_flag", "_unset")

    def __init__(self) -> None:
        self._flag = False
        self._unset = threading.Lock()
        self._unset.acquire()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            with contextlib.suppress(RuntimeError):  # a second setter, at the same instant
                self._unset.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set (at most ``timeout`` s); whether it is."""
        if self._flag:
            return True
        if self._unset.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            self._unset.release()  # for the next waiter
        return self._flag


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool knows about the call it serves."""

    run_id: str
    thread_id: str
    tool_call_id: str
    idempotency_key: str
    """sha256(run_id + tool_call_id): the same on every retry of this call."""
    origin: Origin = field(default_factory=Origin)
    agent: str = ""
    """The name of the agent whose run it serves ("" where none is known): what it may see
    (``search_knowledge``'s sources), whose memories it keeps."""
    cancel_grace_s: float = 5.0
    """How long a cancelled subprocess gets between SIGTERM and SIGKILL."""
    cancelled: CancelFlag = field(default_factory=CancelFlag)
    """Set when the call is given up (the run is cancelled or stops, the call timed out):
    a sync tool, which runs on in its worker thread, looks at it to stop early."""
    services: Mapping[str, Any] = field(default_factory=dict)
    """The runtime's services this tool declared it ``needs``, by name."""

    def service(self, name: str) -> Any:
        """The service ``name`` (``notes``, ``send``, or one the app gives, such as
        ``schedules``); ``ToolFailure`` if the tool did not declare it or it is not there."""
        return needed(self.services, name, "tool")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tool:
    """A callable the model can use. Build one with the ``@tool`` decorator."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = "read_only",
        requires_approval: bool = False,
        timeout_s: float = 30.0,
        needs: Iterable[str] = (),
    ) -> None:
        self._describe(fn, name or fn.__name__,
                       description or _first_paragraph(inspect.getdoc(fn) or ""),
                       effect, requires_approval, timeout_s, needs)
        self._context_param, self._args_model = _signature_model(fn, self.name)
        schema = self._args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        self.spec = ToolSpec(self.name, self.description, schema)

    def _describe(self, fn: Callable[..., Any], name: str, description: str, effect: Effect,
                  requires_approval: bool, timeout_s: float, needs: Iterable[str]) -> None:
        if effect not in ("read_only", "idempotent_write", "non_idempotent"):
            raise ToolDefinitionError(f"unknown effect {effect!r}")
        self.fn = fn
        self.name = name
        self.description = description
        self.effect: Effect = effect
        self.requires_approval = requires_approval
        self.timeout_s = timeout_s
        self.reconciler: Callable[[ToolContext], Any] | None = None
        self.prelude: Prelude | None = None
        """What it puts before a run's first model turn, unasked (``tools.prelude``)."""
        self.keeper: Keeper | None = None
        """What it keeps of entries falling out of the window (``tools.keeping``)."""
        self.needs: frozenset[str] = frozenset(needs)
        """The runtime services its ``ToolContext`` carries (``ctx.service(name)``)."""

    def __repr__(self) -> str:
        return f"<Tool {self.name} effect={self.effect}>"

    def with_approval(self, required: bool) -> Tool:
        """A copy of this tool that does (or does not) wait for a person before each call."""
        twin = copy.copy(self)
        twin.requires_approval = required
        return twin

    def reconcile(self, fn: Callable[[ToolContext], Any]) -> Callable[[ToolContext], Any]:
        """Decorate the hook that tells, after a crash, whether this call's effect happened.

        It returns the call's result if it did, or ``NOT_DONE`` (then the call runs).
        """
        self.reconciler = fn
        return fn

    def opens(self, fn: Prelude) -> Prelude:
        """Decorate the tool's prelude (``tools.prelude``): asked once as a run starts."""
        self.prelude = fn
        return fn

    def keeps(self, fn: Keeper) -> Keeper:
        """Decorate the tool's keeper (``tools.keeping``): handed what the model chose to
        keep of the entries about to be summarised."""
        self.keeper = fn
        return fn

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check the model's arguments; raise ``ValueError`` with a readable reason."""
        if not isinstance(arguments, Mapping):
            raise ValueError(f"arguments must be a JSON object, got {_json_type(arguments)}")
        try:
            model = self._args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ValueError(_summarise(exc)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def invoke(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        """Run the function with validated arguments; returns its JSON-able result."""
        kwargs = dict(arguments)
        if self._context_param:
            kwargs[self._context_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(**kwargs)
        else:
            # A sync tool runs in a worker thread; on timeout the thread is abandoned.
            result = await asyncio.to_thread(self.fn, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        return jsonable(result)

    async def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutput:
        """``invoke`` within the tool's timeout: its output, or the error the model is
        shown (a timeout, the exception's message). A call given up (timed out, or its
        task cancelled) sets ``ctx.cancelled``: a sync tool's thread runs on, and may
        look."""
        try:
            async with asyncio.timeout(self.timeout_s):
                output = await self.invoke(ctx, arguments)
            return split_files(output)
        except asyncio.CancelledError:
            ctx.cancelled.set()
            raise
        except TimeoutError:
            ctx.cancelled.set()
            return error_result("timeout", f"{self.name} did not finish within "
                                f"{self.timeout_s:g} s")
        except ToolFailure as exc:
            return error_result("exception", str(exc))
        except Exception as exc:
            return error_result("exception", f"{type(exc).__name__}: {exc}")

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: dict[str, Any],
        call: Callable[[ToolContext, dict[str, Any]], Awaitable[Any]],
        *,
        check: Callable[[dict[str, Any]], None] | None = None,
        effect: Effect = "non_idempotent",
        requires_approval: bool = False,
        timeout_s: float = 30.0,
        needs: Iterable[str] = (),
    ) -> Tool:
        """A tool whose arguments are described by a JSON schema rather than a signature.

        ``call(ctx, arguments)`` runs it; ``check(arguments)``, if given, raises
        ``ValueError`` with a readable reason for arguments the schema refuses (without
        it, any JSON object is passed on, for the tool itself to judge).
        """
        return _SchemaTool(name, description, parameters, call, check=check, effect=effect,
                           requires_approval=requires_approval, timeout_s=timeout_s,
                           needs=needs)

    async def run_reconcile(self, ctx: ToolContext) -> Any:
        assert self.reconciler is not None
        result = self.reconciler(ctx)
        if isinstance(result, Awaitable):
            result = await result
        return result if result is NOT_DONE else to_jsonable_python(result)


class _SchemaTool(Tool):
    """``Tool.from_schema``: the schema is given, the arguments go to ``call`` as one dict."""

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        call: Callable[[ToolContext, dict[str, Any]], Awaitable[Any]],
        *,
        check: Callable[[dict[str, Any]], None] | None,
        effect: Effect,
        requires_approval: bool,
        timeout_s: float,
        needs: Iterable[str],
    ) -> None:
        self._describe(call, name, description, effect, requires_approval, timeout_s, needs)
        self._check = check
        self._context_param = None
        schema = dict(parameters)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.spec = ToolSpec(name, description, schema)

    def validate(self, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            raise ValueError(f"arguments must be a JSON object, got {_json_type(arguments)}")
        checked = dict(arguments)
        if self._check is not None:
            self._check(checked)
        return checked

    async def invoke(self, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        return jsonable(await self.fn(ctx, dict(arguments)))


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read_only",
    requires_approval: bool = False,
    timeout_s: float = 30.0,
    needs: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "read_only",
    requires_approval: bool = False,
    timeout_s: float = 30.0,
    needs: Iterable[str] = (),
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function (sync or async) into a ``Tool``: ``@tool`` or ``@tool(effect=...)``.

    ``needs`` names the runtime services the tool uses (``notes``, ``send``, or one the
    app provides): its ``ToolContext`` carries those, and only those."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, effect=effect,
                    requires_approval=requires_approval, timeout_s=timeout_s, needs=needs)

    return wrap if fn is None else wrap(fn)


def _signature_model(fn: Callable[..., Any], tool_name: str) -> tuple[str | None, type[_Args]]:
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot read type hints: {exc}") from exc
    context_param: str | None = None
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name!r}: *args/**kwargs cannot be described")
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    try:
        model = create_model(f"{tool_name}_args", __base__=_Args, **fields)
    except Exception as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: {exc}") from exc
    return context_param, model


def _first_paragraph(doc: str) -> str:
    return doc.split("\n\n", 1)[0].replace("\n", " ").strip()


def _json_type(value: Any) -> str:
    names = {str: "a string", list: "an array", int: "a number", float: "a number",
             bool: "a boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
