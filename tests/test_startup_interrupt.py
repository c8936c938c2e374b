"""Ctrl-C while `maiden` is still loading its modules: one line and exit 130, no traceback."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "maiden"


@pytest.mark.parametrize("command", [[sys.executable, "-X", "importtime", "-m", "bot"],
                                     [sys.executable, "-X", "importtime", str(SCRIPT)]],
                         ids=["python -m bot", "maiden"])
async def test_ctrl_c_while_the_modules_load_is_one_line(home: Path,
                                                         command: list[str]) -> None:
    if not SCRIPT.exists():
        pytest.skip("the maiden script is not installed next to this python")
    proc = await asyncio.create_subprocess_exec(
        *command, "run", cwd=home, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    async with asyncio.timeout(60):
        # -X importtime writes a line as each module has loaded: Ctrl-C once the runtime's
        # first modules are in, while the rest still load.
        while line := await proc.stderr.readline():
            if b"runtime.errors" in line:
                proc.send_signal(signal.SIGINT)
                break
        rest = (await proc.stderr.read()).decode()
        assert await proc.wait() == 130
    said = [line for line in rest.splitlines() if not line.startswith("import time:")]
    assert said == ["maiden: interrupted"]
