"""Files in and out of the soak: which messages carry a file, and which ask for a report.

Drawn from a stream of its own (``{seed}:{store}:files``), after every other draw, so a
seed's plan before files stays as it was but for these: a few Slack, Discord and HTTP
messages carry one of a few files (the same bytes reused, so each must be stored once), and
a few ask, as their last turn, for ``report``, the tool that hands back a file (a
``ToolFile``) that maiden must upload once to the message's Slack thread or Discord channel.

Each text file has a marker line of its own, which the model's request for the run must
show (the OpenAI wire sends a text file as a text part); the PNG, its bytes (an
``image_url`` part, a data URL). The checks are ``files_checks``'.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["FILES", "REPORT", "draw_files", "media_type", "report_data", "report_name"]



def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour (the OpenAI wire sends it as an ``image_url`` data URL)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


# name -> bytes: a few distinct files, shared again and again (the store keeps each once)
FILES = {
    "chart.png": _png(4, 3, (200, 40, 90)),
    "build.log": b"chaos file build.log\nstep 3: FAILED (exit 2)\n",
    "notes.txt": b"chaos file notes.txt\nthe numbers are in the second column\n",
    "data.csv": b"chaos file data.csv\nmonth,total\n2026-11,42\n2026-12,7\n",
}
REPORT = "report"  # the tool that hands back a file (chaos/effects.py)
FILE_SHARE = 0.15  # of the Slack, Discord and plain HTTP messages: carry a file
REPORT_SHARE = 0.12  # of the Slack, Discord and HTTP messages: ask for a report at the end
_ROUTES_IN = ("slack", "discord", "http")  # "http": a multipart/form-data POST
_ROUTES_OUT = ("slack", "discord", "http", "http_stream")


def media_type(name: str) -> str:
    return {"csv": "text/csv", "png": "image/png"}.get(name.rsplit(".", 1)[-1], "text/plain")


def marker(name: str) -> str:
    """What the model's request must show of ``name``: a text file's first line, an
    image's bytes in base64 (its data URL)."""
    if name.endswith(".png"):
        return base64.b64encode(FILES[name]).decode()
    return FILES[name].decode().splitlines()[0]


def report_name(tag: str) -> str:
    return f"report-{tag}.txt"


def report_data(tag: str) -> bytes:
    return f"chaos report for {tag}\n".encode()


def draw_files(seed: int, plan: Plan) -> None:
    """Mark the plan's messages that carry a file (``op.files``) and those that ask for a
    report last (``report`` appended to ``op.steps``); a schedule tool's message neither."""
    rng = random.Random(f"{seed}:{plan.store}:files")
    for op in plan.ops:
        if any("=" in step for turn in op.steps for step in turn):
            continue
        if op.route in _ROUTES_IN and rng.random() < FILE_SHARE:
            op.files = [rng.choice(sorted(FILES))]
        if op.route in _ROUTES_OUT and rng.random() < REPORT_SHARE:
            op.steps = [*op.steps, [REPORT]]
