"""The crash drill's files: ``--file NAME`` makes the message carry ``DIR/shared/NAME`` as
a file its channel announced, fetched by ``Shelf`` as the run's first step. The shelf
reads half the file, may die there (``in_fetch``), reads the rest, and notes each whole
fetch in ``fetches.jsonl``; the store may die right after storing a blob
(``after_blob_stored``). A ``--file`` the shelf does not have is refused: the person is
told so as the run starts, before its answer. ``--late-fetcher``: a runtime without the
shelf recovers first (as a command that opens no channels would), then one built with it,
whose first download finds the platform out of reach (``FileUnreachable``, tried again).
``--make-file``: the model calls ``make_file``, whose report goes out after the answer; the
channel may die right after taking it (``after_file_uploaded``). Uploaded to Slack
(``--slack``), in steps, the store may die around recording the upload's id and before the
delivered file is recorded (``before_upload_recorded``, ``after_upload_recorded``,
``after_upload_completed``).
The summary lists the store's blobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime import FileRefused, FileSource, FileUnreachable, ToolFile, tool

__all__ = ["FETCHES_FILE", "FILE_KILL_POINTS", "MADE", "MAKE_FILE_SCRIPT", "SHARED", "Shelf",
           "make_file", "sources"]

FILE_KILL_POINTS = (
    "in_fetch",                 # --file: half the file read from the channel, nothing stored
    "after_blob_stored",        # --file: a blob is stored, the message not yet in the thread
    "after_file_uploaded",      # --make-file: the file is in the channel, its id not stored
    "before_upload_recorded",   # --make-file --slack: Slack gave the upload its id and has
                                # the bytes; the id is not stored
    "after_upload_recorded",    # --make-file --slack: the id stored, the upload not completed
    "after_upload_completed",   # --make-file --slack: completed (shared in the thread), the
                                # file's delivery not recorded
)
MADE = ToolFile("report.csv", "text/csv", b"n,square\n" + b"".join(
    f"{n},{n * n}\n".encode() for n in range(100)))
"""What ``make_file`` hands back."""
MAKE_FILE_SCRIPT: list[dict[str, Any]] = [{"tool_calls": [{"name": "make_file", "arguments": {}}]},
                    {"text": "Here is the report."}]


@tool(name="make_file")
def make_file() -> ToolFile:
    """Build the report."""
    return MADE
SHARED = "shared"
FETCHES_FILE = "fetches.jsonl"


def sources(channel: str, names: list[str]) -> list[FileSource]:
    """What the channel announces with the message."""
    return [FileSource(via=channel, url=f"shelf:{name}", name=name,
                       media_type="application/octet-stream") for name in names]


class Shelf:
    """The test channel's files, fetched from ``DIR/shared``."""

    def __init__(self, workdir: Path, switch: object, *, down: int = 0) -> None:
        self.workdir = workdir
        self.switch = switch
        self.down = down
        """How many downloads find the shelf out of reach first."""

    async def fetch(self, source: FileSource, max_bytes: int) -> bytes:
        from tests.crash.driver import append_line

        if self.down:
            self.down -= 1
            raise FileUnreachable(source.name, "the shelf could not be reached")

        path = self.workdir / SHARED / source.url.removeprefix("shelf:")
        if not path.exists():  # a file the person shared is gone: refused, and told so
            raise FileRefused(source.name, "the shelf no longer has it")
        data = path.read_bytes()
        half = data[:len(data) // 2]
        self.switch.reached("in_fetch")  # type: ignore[attr-defined]
        whole = half + data[len(half):]
        append_line(self.workdir / FETCHES_FILE, {"name": source.name, "size": len(whole)})
        return whole
