"""A real MCP server, written with the official SDK, for maiden's MCP tests.

    python tests/fakes/mcp_server.py                      # stdio (what maiden starts)
    python tests/fakes/mcp_server.py --http TOKEN         # streamable HTTP on 127.0.0.1;
                                                          # prints "port N"; needs the
                                                          # header X-Token: TOKEN

Its tools cover what maiden must handle: annotations of each kind and none, a tool that
reports an error, one that answers with a protocol error (``refuse``: a JSON-RPC error
response), a slow one (``MCP_MARKS``: a folder where it notes when it started and when it
was cancelled), one slow only the first time (``nap``, for crash recovery), one that kills
the server mid-call, ``key`` (the idempotency key maiden sent), ``pid`` (to tell a
restarted server from the first one) and ``chart`` (text and an image). With
``MCP_MARKS`` it also writes its pid to ``server.pid`` as it starts (to tell when it is
gone). ``MCP_LINGER``: over stdio, keep
running after stdin closes, as a server stuck in its work would (only a signal ends it).
``MCP_FAKE_TOOLS``: a comma-separated subset to list (default: all). ``MCP_TASKS``: speak
the 2025-11-25 protocol (no ``server/discover``: clients fall back to ``initialize``) and also
list ``batch``, a tool that may run only as an MCP task (``execution.taskSupport =
"required"``), as a server using that revision's tasks does.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp.types import Tool, ToolAnnotations, ToolExecution

app = MCPServer("maiden-fake")

READ_ONLY = ToolAnnotations(read_only_hint=True)
IDEMPOTENT = ToolAnnotations(idempotent_hint=True, destructive_hint=False)
DESTRUCTIVE = ToolAnnotations(idempotent_hint=True)  # destructive by the spec's default
_store: dict[str, str] = {}


def _first_time(name: str) -> bool:
    """Whether mark ``name`` is new (it is made now)."""
    folder = os.environ.get("MCP_MARKS")
    if not folder or Path(folder, name).exists():
        return False
    _mark(name)
    return True


def _mark(name: str) -> None:
    folder = os.environ.get("MCP_MARKS")
    if folder:
        Path(folder, name).write_text(str(os.getpid()))


@app.tool(annotations=READ_ONLY, structured_output=False)
def echo(text: str) -> str:
    """Say the text back."""
    return text


@app.tool(annotations=IDEMPOTENT, structured_output=False)
def put(key: str, value: str) -> str:
    """Store a value under a key."""
    _store[key] = value
    return f"stored {key}"


@app.tool(annotations=DESTRUCTIVE, structured_output=False)
def drop(key: str) -> str:
    """Forget a key."""
    _store.pop(key, None)
    return f"dropped {key}"


@app.tool(structured_output=False)
def count(n: int = 1) -> dict[str, Any]:
    """Count up to n (no annotations)."""
    return {"numbers": list(range(1, n + 1))}


@app.tool(annotations=READ_ONLY, structured_output=False)
def fail(why: str) -> str:
    """Always fails."""
    raise ToolError(why)


@app.tool(annotations=READ_ONLY, structured_output=False)
def refuse(code: int, message: str) -> str:
    """Answer with a JSON-RPC error response of that code (not an isError result)."""
    raise MCPError(code=code, message=message)


@app.tool(annotations=READ_ONLY, structured_output=False)
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    _mark("slow.started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark("slow.cancelled")
        raise
    return "slept"


@app.tool(annotations=READ_ONLY, structured_output=False)
async def nap(seconds: float) -> str:
    """Sleep the first time it is called (with MCP_MARKS), answer at once after that."""
    if _first_time("nap.started"):
        await asyncio.sleep(seconds)
    return "rested"


@app.tool(annotations=IDEMPOTENT, structured_output=False)
def key(ctx: Context) -> str:
    """The idempotency key maiden sent with this call (in the request's _meta)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("maiden/idempotency_key"))


@app.tool(annotations=READ_ONLY, structured_output=False)
def die() -> str:
    """Kill the server in the middle of the call."""
    _mark("die.called")
    os._exit(3)


@app.tool(annotations=READ_ONLY, structured_output=False)
def pid() -> int:
    """This server process's id."""
    return os.getpid()


@app.tool(annotations=READ_ONLY, structured_output=False)
def chart() -> list[Any]:
    """A chart: a line of text and a PNG (an MCP ImageContent)."""
    import io

    from PIL import Image as Picture

    out = io.BytesIO()
    Picture.new("RGB", (120, 80), (20, 120, 200)).save(out, format="PNG")
    return ["sales by month:", Image(data=out.getvalue(), format="png")]


@app.tool(annotations=READ_ONLY, structured_output=False)
def batch() -> str:
    """A long job, listed as one to run only as an MCP task (with MCP_TASKS)."""
    return "a plain call was answered"


_listed = app.list_tools


async def _with_tasks() -> list[Tool]:
    """The listing, with ``batch`` marked as a tool that runs only as a task."""
    required = ToolExecution(task_support="required")
    return [t.model_copy(update={"execution": required}) if t.name == "batch" else t
            for t in await _listed()]


async def _serve_2025_with_tasks() -> None:
    """Over stdio, as a server of the handshake era (up to 2025-11-25) only, listing ``batch``
    as a tool that runs only as a task (a field of that revision)."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    app.list_tools = _with_tasks  # type: ignore[method-assign]
    low = app._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state,
                         init_options=low.create_initialization_options())


def _keep_only(names: str) -> None:
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    for tool in list(app._tool_manager.list_tools()):
        if tool.name not in wanted:
            app.remove_tool(tool.name)


async def _serve_http(token: str) -> None:
    import uvicorn

    inner = app.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"x-token") != token.encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no token"})
                return
        await inner(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is told: a client that connects before uvicorn has started
    # waits in the backlog instead of being refused.
    sock.listen(128)
    print(f"port {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(guarded, log_level="warning", lifespan="on"))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    _mark("server.pid")
    if not os.environ.get("MCP_TASKS"):
        app.remove_tool("batch")
    if os.environ.get("MCP_FAKE_TOOLS"):
        _keep_only(os.environ["MCP_FAKE_TOOLS"])
    if os.environ.get("MCP_TASKS"):
        asyncio.run(_serve_2025_with_tasks())
    elif sys.argv[1:2] == ["--http"]:
        asyncio.run(_serve_http(sys.argv[2]))
    else:
        app.run()
        if os.environ.get("MCP_LINGER"):
            time.sleep(3600)
