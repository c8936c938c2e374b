"""A tool's prelude (runtime/engine/preludes.py): its notice goes before the run's first
turn, committed with the message; one that fails or hangs is left out and the run goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import (
    EchoProvider,
    ModelRequest,
    ModelResponse,
    Notice,
    Runtime,
    SQLiteStore,
    ToolRegistry,
    tool,
)
from runtime.tools.prelude import Opening


class Seen(EchoProvider):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        self.requests.append(request)
        return await super().complete(request, on_text)


async def test_preludes_are_asked_once_and_a_failing_one_is_left_out(tmp_path: Path) -> None:
    asked: list[str] = []

    @tool(timeout_s=0.05)
    async def hangs() -> str:
        return ""

    @tool
    async def fails() -> str:
        return ""

    @tool
    async def says() -> str:
        return ""

    @hangs.opens
    async def _hang(opening: Opening) -> Notice | None:
        await asyncio.Event().wait()
        return None

    @fails.opens
    async def _fail(opening: Opening) -> Notice | None:
        raise RuntimeError("no")

    @says.opens
    async def _say(opening: Opening) -> Notice | None:
        asked.append(opening.text)
        return Notice(run_id=opening.run_id, code="hint", text=f"{opening.agent} hint",
                      at=opening.at)

    model = Seen()
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, model, ToolRegistry([hangs, fails, says])) as rt:
        run = await rt.send("t", "/tool says {}")
        entries = await rt.records.entries("t")
    assert run.state == "completed" and asked == ["/tool says {}"]  # once, not per turn
    hints = [e for e in entries if isinstance(e, Notice) and e.code == "hint"]
    assert [h.text for h in hints] == ["maiden hint"]
    assert all(hints[0] in r.entries for r in model.requests) and len(model.requests) == 2
