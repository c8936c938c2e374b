"""Files in and out of the soak: which messages carry a file, and which ask for a report.

Drawn from a stream of its own (``{seed}:{store}:files``), after every other draw, so a
seed's plan before files stays as it was but for these: a few Slack, Discord and HTTP
messages carry one of a few files (the same bytes reused, so each must be stored once), and
a few ask, as their last turn, for ``report``, the tool that hands back a file (a
``ToolFile``) that maiden must upload once to the message's Slack thread or Discord channel.

Each text file has a marker line of its own, which the model's request for the run must
show (the OpenAI wire sends a text file as a text part); the PDF, its text (maiden reads it
out: the soak's model is an OpenAI-compatible server, not OpenAI's own, so it is not sent
the PDF itself); the PNG, its bytes (an ``image_url`` part, a data URL). The checks are
``files_checks``'.

What came after (``draw_more_files``, a stream of its own, ``{seed}:{store}:files-more``,
so the draws above stay as they were): the PDF; a file maiden refuses (a type not in the
soak's ``[files] allowed_types``, or one over its ``max_bytes``), refused with a 413 / 415
over HTTP and by ``maiden send``, with one reply naming it in Slack and Discord; how an
HTTP message carries its file (``via``: a multipart part, the JSON's ``files`` in base64,
or ``maiden send --file``); a Slack file whose download answers Slack's sign-in page
(``via = "signin"``), and one whose first download is held half-way while the replica
downloading it is killed (``via = "hold"``: the fake's ``hold``, chaos/holds.py).

And last (``draw_last_files``, two streams of their own, so the draws above stay as they
were): messages carrying one file more than the soak's ``[files] max_per_message``, the
last always ``extra.txt`` (carried by no other message, so that "never stored" can be held
to it), refused whole over HTTP (422) and by ``maiden send`` (exit 2), read but for the
last in Slack and Discord, whose place is told once it was not read (``files-count``); and
Discord files whose first download from the CDN is held half-way while the replica
downloading it is killed, as Slack's (``files-hold``).
"""

from __future__ import annotations

import base64
import random
import struct
import zlib

from tests.samples import pdf

from .ops import Drawing, Op

__all__ = ["FILES", "FILES_TOML", "MAX_PER_MESSAGE", "OVER", "REFUSED", "REPORT", "beyond",
           "draw_files", "draw_last_files", "draw_more_files", "media_type", "refused",
           "refuses_message", "report_data", "report_name"]


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
    "brief.pdf": pdf("chaos file brief.pdf: the quarter closed at 42"),
}
# Files maiden refuses under the soak's [files] (FILES_TOML), by what it says of each: a
# type it does not read, and one over its size limit.
REFUSED = {
    "setup.zip": b"PK\x03\x04chaos archive" + bytes(64),
    "dump.log": b"chaos file dump.log\n" + b"0123456789abcdef" * 5_000,  # 80 kB
}
# The file a message carries beyond [files] max_per_message (always its last, and no other
# message's): maiden never reads it, so its bytes are never stored.
OVER = {"extra.txt": b"chaos file extra.txt\none file more than maiden reads\n"}
MAX_PER_MESSAGE = 3
FILES_TOML = f"""
[files]
max_bytes = 65536
max_per_message = {MAX_PER_MESSAGE}
allowed_types = ["text/*", "image/*", "application/pdf", "application/octet-stream"]
"""
_FIRST = ("build.log", "chart.png", "data.csv", "notes.txt")  # draw_files' (the PDF came later)
REPORT = "report"  # the tool that hands back a file (chaos/effects.py)
FILE_SHARE = 0.15  # of the Slack, Discord and plain HTTP messages: carry a file
REPORT_SHARE = 0.12  # of the Slack, Discord and HTTP messages: ask for a report at the end
_ROUTES_IN = ("slack", "discord", "http")  # "http": a multipart/form-data POST
_ROUTES_OUT = ("slack", "discord", "http", "http_stream")


def media_type(name: str) -> str:
    return {"csv": "text/csv", "png": "image/png", "pdf": "application/pdf",
            "zip": "application/zip"}.get(name.rsplit(".", 1)[-1], "text/plain")


def data_of(name: str) -> bytes:
    return FILES.get(name) or REFUSED.get(name) or OVER[name]


def refused(op: Op) -> str | None:
    """The file of ``op`` that maiden refuses, if it carries one."""
    return next((name for name in op.files if name in REFUSED), None)


def beyond(op: Op) -> list[str]:
    """The files of ``op`` beyond ``max_per_message`` (not read)."""
    return op.files[MAX_PER_MESSAGE:]


def refuses_message(op: Op) -> bool:
    """Whether maiden turns ``op``'s whole message down where its files come with their
    bytes (the HTTP API, ``maiden send``): a file it refuses, or more than it reads."""
    return refused(op) is not None or bool(beyond(op))


def marker(name: str) -> str:
    """What the model's request must show of ``name``: a text file's first line, an
    image's bytes in base64 (its data URL)."""
    if name.endswith(".png"):
        return base64.b64encode(data_of(name)).decode()
    if name.endswith(".pdf"):
        return f"chaos file {name}: the quarter closed at 42"
    return data_of(name).decode().splitlines()[0]


def report_name(tag: str) -> str:
    return f"report-{tag}.txt"


def report_data(tag: str) -> bytes:
    return f"chaos report for {tag}\n".encode()


def draw_files(seed: int, plan: Drawing) -> None:
    """Mark the plan's messages that carry a file (``op.files``) and those that ask for a
    report last (``report`` appended to ``op.steps``); a schedule tool's message neither."""
    rng = random.Random(f"{seed}:{plan.store}:files")
    for op in plan.ops:
        if any("=" in step for turn in op.steps for step in turn):
            continue
        if op.route in _ROUTES_IN and rng.random() < FILE_SHARE:
            op.files = [rng.choice(_FIRST)]
        if op.route in _ROUTES_OUT and rng.random() < REPORT_SHARE:
            op.steps = [*op.steps, [REPORT]]


PDF_SHARE = 0.04  # of the Slack, Discord and HTTP messages without a file: carry the PDF
REFUSED_SHARE = 0.03  # of those: carry a file maiden refuses
SIGN_IN_SHARE = 0.12  # of the Slack messages with a file: its download is the sign-in page
HOLD_SHARE = 0.15  # of the others: its download held half-way, and the downloader killed
VIA = [(0.55, "multipart"), (0.85, "json"), (1.0, "cli")]  # how an HTTP message's file goes


def draw_more_files(seed: int, plan: Drawing) -> None:
    """The PDF, the refused files, how an HTTP message carries its file (``op.via``),
    Slack's sign-in page and its held downloads, from their own stream (three draws for
    every message, so one message's draws never shift another's). ``maiden send`` takes no
    ``deploy`` (it would wait for a decision at the terminal) and no cancel; a refused file
    goes with neither (there is no run to decide or cancel over HTTP)."""
    rng = random.Random(f"{seed}:{plan.store}:files-more")
    for op in plan.ops:
        what, how, pick = rng.random(), rng.random(), rng.random()
        if any("=" in step for turn in op.steps for step in turn) or op.route not in _ROUTES_IN:
            continue
        plain = op.decide is None and op.cancel_after_s is None
        if not op.files and what < PDF_SHARE:
            op.files = ["brief.pdf"]
        elif not op.files and what < PDF_SHARE + REFUSED_SHARE and plain:
            op.files = [sorted(REFUSED)[int(pick * len(REFUSED))]]
        if op.route == "http" and op.files:
            op.via = next(v for share, v in VIA if how < share)
            if op.via == "cli" and not (plain and not any("deploy" in t for t in op.steps)):
                op.via = "json"
        if op.route == "slack" and op.files and not refused(op) and how < SIGN_IN_SHARE:
            op.via = "signin"
        elif op.route == "slack" and op.files and not refused(op) and how > 1 - HOLD_SHARE:
            op.via = "hold"


COUNT_SHARE = 0.08  # of the Slack, Discord and HTTP messages without a file: one file too many
DISCORD_HOLD_SHARE = 0.5  # of the Discord messages with a file read: its download held


def draw_last_files(seed: int, plan: Drawing) -> None:
    """Messages with one file more than ``max_per_message`` (``MAX_PER_MESSAGE`` of
    ``FILES``, then ``extra.txt``; over HTTP, how they go), and Discord's held downloads
    (``via = "hold"``), from two streams of their own, a fixed number of draws a message.
    As a refused file, the files of one too many go with no ``deploy`` and no cancel."""
    count = random.Random(f"{seed}:{plan.store}:files-count")
    hold = random.Random(f"{seed}:{plan.store}:files-hold")
    names = sorted(FILES)
    for op in plan.ops:
        what, how, pick, held = count.random(), count.random(), count.random(), hold.random()
        if any("=" in step for turn in op.steps for step in turn) or op.route not in _ROUTES_IN:
            continue
        plain = op.decide is None and op.cancel_after_s is None \
            and not any("deploy" in turn for turn in op.steps)
        if not op.files and plain and what < COUNT_SHARE:
            first = int(pick * len(names))
            op.files = [names[(first + n) % len(names)] for n in range(MAX_PER_MESSAGE)]
            op.files.append(*OVER)
            if op.route == "http":
                op.via = next(v for share, v in VIA if how < share)
        if op.route == "discord" and op.files and not refused(op) and held < DISCORD_HOLD_SHARE:
            op.via = "hold"
