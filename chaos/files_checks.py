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

Refused: a message over HTTP (or ``maiden send``) carrying a file maiden refuses is turned
down (413 for its size, 415 for its type; ``maiden send`` exits 2), naming the file, and
makes no run; in Slack and Discord its run goes on without the file, and its place is told
once (``I could not read NAME: why.``) for each run that started. A Slack file whose
download answered the sign-in page is refused the same way: the model is never shown the
page (nor the file), and the page is not stored. A Slack or Discord file whose first
download was held half-way while its downloader was killed is held to what any file is
(shown, stored once), and the half it got is never stored. A message with one file more
than ``[files] max_per_message`` is refused whole over HTTP (422, naming the limit) and by
``maiden send`` (exit 2); in Slack and Discord its first files are held to what any file
is, and the one beyond (``extra.txt``, which no other message carries) to what a refused
file is: never shown to the model nor stored, its place told once, naming the limit.

Out over HTTP (``check_downloads``): a report a run of the HTTP API handed back downloads at
``GET /v1/files/{digest}`` with its person's token, byte for byte, and not with another
person's (404) nor without one (401).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.fakes.slack.files import SIGN_IN_PAGE

from .files import (
    MAX_PER_MESSAGE,
    REPORT,
    beyond,
    data_of,
    marker,
    refused,
    report_data,
    report_name,
)
from .invariants import Stored, Violation
from .plan import Plan
from .sent import Sent
from .system import OUTSIDER, token_of

__all__ = ["blob_digests", "check_downloads", "check_files", "files_summary"]

SIGNED_OUT = "Sign in to Maiden Test"  # the fake Slack's sign-in page says so


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _asks_report(sent: Sent) -> bool:
    return any(REPORT in turn for turn in sent.op.steps)


def _seen_by_model(log: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    """Tag -> every request the model logged for it, as one string; and tag -> the user
    messages of those requests that carry its message (what it was shown with it)."""
    seen: dict[str, list[str]] = {}
    own: dict[str, list[str]] = {}
    if log is not None and log.exists():
        for line in log.read_text().splitlines():
            record = json.loads(line)
            tag = record["tag"]
            seen.setdefault(tag, []).append(json.dumps(record["messages"]))
            own.setdefault(tag, []).extend(
                json.dumps(m) for m in record["messages"] if m.get("role") == "user"
                and f"[{tag}]" in json.dumps(m))
    return ({tag: "\n".join(requests) for tag, requests in seen.items()},
            {tag: "\n".join(messages) for tag, messages in own.items()})


def _not_read(sent: Sent) -> str | None:
    """The file of ``sent`` that maiden must not read: refused, served as a sign-in page, or
    beyond ``max_per_message``."""
    op = sent.op
    return refused(op) or (op.files[0] if op.via == "signin" else None) \
        or next(iter(beyond(op)), None)


def _read(sent: Sent) -> list[str]:
    """The files of ``sent`` that maiden must read (show the model, store), if it makes a
    run: none of a message over HTTP with one too many (it is refused whole)."""
    if sent.op.route == "http" and beyond(sent.op):
        return []
    return [name for name in sent.op.files[:MAX_PER_MESSAGE] if name != _not_read(sent)]


def _told(sent: Sent, name: str, slack: FakeSlack | None, discord: FakeDiscord | None
          ) -> list[str] | None:
    """The bot's lines in ``sent``'s place saying it could not read ``name`` (None off
    Slack and Discord)."""
    said = f"I could not read {name}:"
    if sent.op.route == "slack" and slack is not None and sent.thread.count(":") == 3:
        _, _, channel, root = sent.thread.split(":")
        return [str(m.get("text")) for m in slack.messages(channel) if m.get("user") == BOT_USER
                and m.get("thread_ts") == root and said in str(m.get("text") or "")]
    if sent.op.route == "discord" and discord is not None:
        # Its place may hold other messages that shared a file of that name: the lines that
        # answer this message (a reply to it), as the Discord deliverer posts them.
        channel, bot = sent.thread.rsplit(":", 1)[-1], discord.world.bot_id
        messages = discord.messages(channel)
        asked = {str(m["id"]) for m in messages if m["author"]["id"] != bot
                 and f"[{sent.op.tag}]" in str(m.get("content") or "")}
        return [str(m.get("content")) for m in messages
                if m["author"]["id"] == bot and said in str(m.get("content") or "")
                and str((m.get("message_reference") or {}).get("message_id")) in asked]
    return None


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
    seen, own = _seen_by_model(log)
    held = Counter(blobs)
    for digest, n in held.items():
        if n > 1:
            out.append(Violation(7, "-", None, f"blob {digest[:12]} stored {n} times"))
    if _digest(SIGN_IN_PAGE) in held:
        out.append(Violation(7, "-", None, "Slack's sign-in page is in the store as a file"))
    out += [Violation(7, "-", None, f"the model was shown Slack's sign-in page for {tag}")
            for tag, requests in seen.items() if SIGNED_OUT in requests]
    # A Slack thread may hold several messages that shared a file of one name maiden does not
    # read; its lines cannot be told apart (a Discord line answers its message: _told).
    sharing = Counter((s.thread, _not_read(s)) for s in sent.values()
                      if s.op.route == "slack" and _not_read(s) is not None)
    read = {name for s in sent.values() for name in _read(s)}  # by some message
    for s in sent.values():
        run = by_text.get(s.op.text)
        done = run is not None and run["state"] == "completed"
        rid = run["run_id"] if run else None
        if _not_read(s) is not None:
            out += _refused(s, run, stored, own, held, slack, discord, read,
                            sharing=sharing[(s.thread, _not_read(s))] or 1)
        for name in s.op.files if s.op.via == "hold" else ():
            if _digest(data_of(name)[:len(data_of(name)) // 2]) in held:
                out.append(Violation(7, s.thread, rid, f"{s.op.tag}: the half of {name} its "
                                     "held download got is in the store", s.accepted_at))
        for name in _read(s) if done else ():
            if marker(name) not in seen.get(s.op.tag, ""):
                out.append(Violation(7, s.thread, rid, f"{s.op.tag}: the model was never "
                                     f"shown its file {name}", s.accepted_at))
            if _digest(data_of(name)) not in held:
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


def _refused(s: Sent, run: dict[str, Any] | None, stored: Stored, own: dict[str, str],
             held: Counter[str], slack: FakeSlack | None, discord: FakeDiscord | None,
             read: set[str], *, sharing: int = 1) -> list[Violation]:
    """A file maiden must not read: turned down with the message over HTTP and by ``maiden
    send`` (no run); in Slack and Discord, the run goes on and its place is told once
    (``sharing``: the messages of its Slack thread that shared a file of that name, each
    told once there). Its bytes are never stored, unless a message read them (``read``:
    the names of the files some message read)."""
    name = _not_read(s)
    assert name is not None
    out: list[Violation] = []
    rid = run["run_id"] if run else None

    def bad(what: str) -> None:
        out.append(Violation(7, s.thread, rid, f"{s.op.tag} ({s.op.route}"
                             f"{', ' + s.op.via if s.op.via else ''}, {name}): {what}",
                             s.accepted_at))

    over = name in beyond(s.op)
    if name not in read and _digest(data_of(name)) in held:
        bad("the file it was not to read is in the store")
    if marker(name) in own.get(s.op.tag, ""):
        bad("the model was shown the file it was not to read")
    if s.op.route == "http":
        if run is not None:
            bad(f"a message with a file refused made run {rid} ({run['state']})")
        turned = s.turned_down
        # One file too many: the message is refused for the count, which names no file.
        want, named = ("422", "max_per_message") if over else (
            {"dump.log": "413", "setup.zip": "415"}[name], name)
        if turned is not None and (named not in turned or (
                s.op.via != "cli" and not turned.startswith(want))):
            bad(f"turned down, but not {want} naming {'the limit' if over else 'the file'}: "
                f"{turned[:200]!r}")
        return out
    told = _told(s, name, slack, discord)
    if told is None or run is None:
        return out
    started = any(e["run_id"] == rid and e["kind"] == "user"
                  for e in stored.entries.get(s.thread, ()))
    if len(told) > sharing or (started and not told) or (
            over and any("max_per_message" not in line for line in told)):
        bad(f"its run {run['state']} ({'started' if started else 'never started'}); its "
            f"place was told {len(told)} time(s) it could not be read: {told}")
    return out


async def check_downloads(http: httpx.AsyncClient, base: str, sent: dict[str, Sent],
                          stored: Stored) -> tuple[list[Violation], str]:
    """Files out over HTTP: each report a completed HTTP API run handed back, fetched at
    its ``url`` with its person's token (the bytes), another person's (404) and none (401);
    with a line for the summary."""
    out: list[Violation] = []
    by_text = {r["text"]: r for r in stored.runs}
    statuses: Counter[str] = Counter()
    for s in sent.values():
        run = by_text.get(s.op.text)
        if s.op.route not in ("http", "http_stream") or not _asks_report(s) or run is None \
                or run["state"] != "completed":
            continue
        rid, name = run["run_id"], report_name(s.op.tag)
        files = [f for f in run.get("files") or () if f["name"] == name]
        if len(files) != 1:
            out.append(Violation(7, s.thread, rid, f"{s.op.tag}: the run's files are "
                                 f"{[f['name'] for f in run.get('files') or ()]}, not one "
                                 f"{name}"))
            continue
        url = base + files[0]["url"]
        for who, want in ((s.op.person, 200), (OUTSIDER, 404), (None, 401)):
            headers = {"Authorization": f"Bearer {token_of(who)}"} if who else {}
            try:
                response = await http.get(url, headers=headers)
            except httpx.HTTPError as exc:
                statuses[type(exc).__name__] += 1
                continue
            statuses[f"{who or 'no token'} {response.status_code}"] += 1
            if response.status_code != want or (
                    want == 200 and response.content != report_data(s.op.tag)):
                out.append(Violation(7, s.thread, rid, f"{s.op.tag}: GET {files[0]['url']} "
                                     f"with {who or 'no'} token: {response.status_code} "
                                     f"{response.content[:80]!r}, expected {want}"
                                     + (" and the report's bytes" if want == 200 else "")))
    line = (f"  files out  GET /v1/files: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(statuses.items())) or 'none'}")
    return out, line


def files_summary(sent: dict[str, Sent], blobs: list[str], slack: FakeSlack | None,
                  discord: FakeDiscord | None, held: dict[str, str] | None = None) -> str:
    carried = Counter(s.op.route + (f"/{s.op.via}" if s.op.via else "")
                      for s in sent.values() if s.op.files)
    holds = Counter((held or {}).values())
    refusals = Counter(f"{s.op.route}{'/' + s.op.via if s.op.via else ''} {_not_read(s)}"
                       for s in sent.values() if _not_read(s))
    over = Counter(s.op.route + (f"/{s.op.via}" if s.op.via else "")
                   for s in sent.values() if beyond(s.op))
    reports = [s for s in sent.values() if _asks_report(s)]
    uploaded = Counter(s.op.route for s in reports
                       for _ in _uploads(s, slack, discord) or ())
    return (f"  files      {sum(carried.values())} messages with a file ("
            f"{', '.join(f'{k} {v}' for k, v in sorted(carried.items())) or 'none'}); "
            f"{len(reports)} asked for a report, uploaded "
            f"{', '.join(f'{k} {v}' for k, v in sorted(uploaded.items())) or 'none'}; "
            f"{len(blobs)} blob(s) stored; over max_per_message: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(over.items())) or 'none'}; not to be read: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(refusals.items())) or 'none'}; "
            f"{sum(1 for s in sent.values() if s.turned_down)} turned down; held downloads: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(holds.items())) or 'none'}")


def blob_digests(infos: list[Any]) -> list[str]:
    """The digests of the store's blob records (``Store.blobs()``)."""
    return [str(info.digest) for info in infos]
