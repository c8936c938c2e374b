"""docs/screenshots.py, the script that takes the docs' console images from a real
`maiden run`: run as the docs say, into a temporary directory (never over docs/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("MAIDEN_CHROMIUM", "/usr/bin/chromium"))
NAMES = ["now", "thread", "approvals", "schedule", "spend"]

# Chromium and a `maiden run`, for up to a minute and a half (the schedule's slot is a real
# minute's): with the browser tests, one at a time ("heavy", as tests/browser/conftest.py).
pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(150)]


def width(png: Path) -> int:
    """A PNG's width, from its header (the IHDR chunk comes first)."""
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", png
    return int.from_bytes(head[16:20], "big")


def test_the_script_writes_the_five_images_and_stops_maiden(tmp_path: Path) -> None:
    pytest.importorskip("playwright",
                        reason="no playwright package: pip install -e '.[dev]' "
                               "(or pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "screenshots.py"),
                           "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    # Exit 0 only once `maiden run` stopped on SIGTERM with exit 0 itself.
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout.splitlines()
    assert said[-1] == "stopped `maiden run` (SIGTERM, exit 0)", done.stdout
    for name in NAMES:
        png = tmp_path / f"console-{name}.png"
        assert width(png) == 1280, name
        assert sum(line.startswith(f"wrote {png}: ") for line in said) == 1, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"console-{name}.png" for name in NAMES)
