"""Invariant 7, files in and out (the plan's side is chaos/files.py).

In: a message that carried a file (a Slack ``file_share``, a Discord attachment, an HTTP
``multipart/form-data`` part) and whose run completed was shown to the model with the file
(its marker line in a request the model logged for its tag), and its bytes are in the
store, once (the blobs' digests: each file is stored once by its sha256, however many
messages carried it). Out: a completed run that asked for a ``report`` has the report's
file in the store, uploaded exactly once into its message's Slack thread or Discord
channel; any other run's report at most once (a kill must never upload it twice); and no
report is uploaded for a message that never asked for one. Invariant 1 already holds each
of these messages to one run and one answer, like any other.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack

from .files import FILES, REPORT, marker, report_data, report_name
from .invariants import Stored, Violation
from .plan import Plan
from .workload import Sent

__all__ = ["check_files", "files_summary"]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _asks_report(sent: Sent) -> bool:
    return any(REPORT in turn for turn in sent.op.steps)


def _seen_by_model(log: Path | None) -> dict[str, str]:
    """Tag -> every request the model logged for it, as one string."""
    seen: dict[str, list[str]] = {}
    if log is not None and log.exists():
        for line in log.read_text().splitlines():
            record = json.loads(line)
            seen.setdefault(record["tag"], []).append(json.dumps(record["messages"]))
    return {tag: "\n".join(requests) for tag, requests in seen.items()}


def _uploads(sent: Sent, slack: FakeSlack | None, discord: FakeDiscord | None
             ) -> list[str] | None:
    """Where the run's report was uploaded, one item an upload (``thread`` if in its
    message's Slack thread or Discord channel, else where); None off Slack and Discord."""
    name = report_name(sent.op.tag)
    if sent.op.route == "slack" and slack is not None and sent.thread.count(":") == 3:
        _, _, channel, root = sent.thread.split(":")
        return ["thread" if m.get("thread_ts") == root else f"ts {m.get('ts')}"
                for m in slack.messages(channel)
                for f in m.get("files") or () if f.get("name") == name]
    if sent.op.route == "discord" and discord is not None:
        channel = sent.thread.rsplit(":", 1)[-1]
        return ["thread" for m in discord.messages(channel)
                for a in m.get("attachments") or () if a.get("filename") == name]
    return None


def check_files(plan: Plan, sent: dict[str, Sent], stored: Stored, blobs: list[str],
                log: Path | None, slack: FakeSlack | None, discord: FakeDiscord | None
                ) -> list[Violation]:
    """Invariant 7 (``blobs``: the digest of every blob the store holds)."""
    out: list[Violation] = []
    by_text = {r["text"]: r for r in stored.runs}
    seen = _seen_by_model(log)
    held = Counter(blobs)
    for digest, n in held.items():
        if n > 1:
            out.append(Violation(7, "-", None, f"blob {digest[:12]} stored {n} times"))
    for s in sent.values():
        run = by_text.get(s.op.text)
        done = run is not None and run["state"] == "completed"
        rid = run["run_id"] if run else None
        for name in s.op.files if done else ():
            if marker(name) not in seen.get(s.op.tag, ""):
                out.append(Violation(7, s.thread, rid, f"{s.op.tag}: the model was never "
                                     f"shown its file {name}", s.accepted_at))
            if _digest(FILES[name]) not in held:
                out.append(Violation(7, s.thread, rid, f"{s.op.tag}: its file {name} is "
                                     "not in the store", s.accepted_at))
        if _asks_report(s) and done and _digest(report_data(s.op.tag)) not in held:
            out.append(Violation(7, s.thread, rid, f"{s.op.tag}: its report is not in the "
                                 "store", s.accepted_at))
        uploads = _uploads(s, slack, discord)
        if uploads is None:
            continue
        want = (1 if done else None) if _asks_report(s) else 0
        if (want is not None and len(uploads) != want) or len(uploads) > 1 \
                or any(u != "thread" for u in uploads):
            state = run["state"] if run else "no run"
            out.append(Violation(7, s.thread, rid, f"{s.op.tag} ({state}"
                                 f"): its report uploaded {len(uploads)} time(s), expected "
                                 f"{'at most 1' if want is None else want}: {uploads}",
                                 s.accepted_at))
    return out


def files_summary(sent: dict[str, Sent], blobs: list[str], slack: FakeSlack | None,
                  discord: FakeDiscord | None) -> str:
    carried = Counter(s.op.route for s in sent.values() if s.op.files)
    reports = [s for s in sent.values() if _asks_report(s)]
    uploaded = Counter(s.op.route for s in reports
                       for _ in _uploads(s, slack, discord) or ())
    return (f"  files      {sum(carried.values())} messages with a file ("
            f"{', '.join(f'{k} {v}' for k, v in sorted(carried.items())) or 'none'}); "
            f"{len(reports)} asked for a report, uploaded "
            f"{', '.join(f'{k} {v}' for k, v in sorted(uploaded.items())) or 'none'}; "
            f"{len(blobs)} blob(s) stored")


def blob_digests(infos: list[Any]) -> list[str]:
    """The digests of the store's blob records (``Store.blobs()``)."""
    return [str(info.digest) for info in infos]
