"""A crash drill: one maiden process over a real store, killable at named points.

    python -m tests.crash.driver --db DB --effect EFFECT --workdir DIR --send THREAD TEXT \\
        [--key KEY] [--requires-approval] [--kill-at POINT [--kill-count N]]
    python -m tests.crash.driver --db DB --effect EFFECT --workdir DIR --fire SLOT \\
        [--late SECONDS] [--kill-at POINT [--kill-count N]]
    python -m tests.crash.driver ... --fire SLOT --job say|chat|tool  (tests/crash/jobs.py)
    python -m tests.crash.driver ... --send THREAD TEXT --job chat  (a reminder asked for)
    python -m tests.crash.driver --db DB --effect EFFECT --workdir DIR [--recover]
    python -m tests.crash.driver ... --approve RUN CALL | --deny RUN CALL
    python -m tests.crash.driver ... --vote USER up|down
    python -m tests.crash.driver ... --command WORDS  (``/maiden WORDS`` by u1 in room r1)
    python -m tests.crash.driver ... --send THREAD TEXT --file NAME  (tests/crash/files.py)
    python -m tests.crash.driver ... --recover --late-fetcher  (tests/crash/files.py)
    python -m tests.crash.driver ... --send THREAD TEXT --cap-tokens N  (a spend cap)
    python -m tests.crash.driver ... --compaction --memory  (tests/crash/memory.py)
    (any of them with --slack API_URL TOKEN CHANNEL THREAD_TS, or --discord ...;
    --send-message CHANNEL: the model posts to that Slack channel with the built-in)

The store is ``--store``'s: ``sqlite`` (the file ``--db``, the default), ``files`` (the
folder ``--db``) or ``postgres`` (the schema ``--db`` on the server ``--dsn``).

Every start goes through ``Runtime.start()`` (startup recovery), so a plain
``--recover`` is a restart and nothing more.

``--fire SLOT`` (an ISO instant, e.g. ``2026-03-02T09:00:00+00:00``) makes the run a
scheduled one: the process defines one schedule, ``job``, whose crontab fires daily at
SLOT's UTC time, with the prompt ``go``; with ``--slack`` it delivers to
``slack:CHANNEL:THREAD_TS``, else nowhere (the answer stays in its thread). It fires
the slot as ``maiden run`` would, on an injected clock and without timers. On a store
that has no record of ``job`` yet, this maiden was up before the slot: the scheduler
starts ``FIRE_LEAD`` before it (a schedule new to the store starts from then), then
the slot's alarm goes off ``--late`` seconds after the slot (``fire_due(woken=...)``).
On a store that has the record (a restart), the scheduler starts ``--late`` seconds
after the slot and its startup catch-up claims the slot if the record does not say it
was claimed. Either way a duplicate trigger follows, and a second scheduler on the same
store (another maiden process) fires too: it claims the slot again unless the record
says it is claimed, and every claim must name the one run holding the slot's key. The
summary then also lists ``fired`` (every claim returned) and ``schedules`` (the records
in the store).

The model is scripted; the one test tool, ``effect_tool``, has the effect class
named by ``--effect`` and leaves countable traces in DIR:

- ``calls.jsonl``: one line per invocation of the tool (every effect class);
- ``effects.jsonl``: one line per *applied* effect (not for ``read_only``; an
  ``idempotent_write`` applies a key once, like a real idempotent API would);
- ``channel.jsonl``: one line per message posted to the fake "testchat" channel;
- ``commands.jsonl``: one line per answer to ``--command`` (what the person was told);
- ``requests.jsonl``: one line per model request, its messages as the OpenAI wire sends them.

Kill points live here only, never in production code: a subclass of the store, the tool
and the channel call ``SIGKILL`` on themselves right after the named step, on its
``--kill-count``-th occurrence. On exit the driver prints a JSON summary of every run,
thread and delivery on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import hmac
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from runtime import (
    NOT_DONE,
    AgentConfig,
    ApprovalDelivery,
    AssistantTurn,
    CapConfig,
    Checkpoint,
    Deliverer,
    Delivery,
    Effect,
    FileDelivery,
    FilesStore,
    ModelRequest,
    ModelResponse,
    Notice,
    Origin,
    ReplyDelivery,
    Run,
    RunState,
    Runtime,
    ScheduleRecord,
    ScriptedProvider,
    SlotMark,
    SQLiteStore,
    StreamDelivery,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
    UploadStarted,
    UserMessage,
    Vote,
    tool,
)
from runtime.engine.tracing import NO_TRACING, OtelTracing
from runtime.model.knowledge import IndexedFile, Piece
from runtime.model.runs import StreamState
from runtime.stores.base import Accepted, RunStore
from runtime.stores.postgres import PostgresStore
from tests.crash.files import FILE_KILL_POINTS, MAKE_FILE_SCRIPT, Shelf, make_file, sources
from tests.crash.jobs import (
    CHAT_NOW,
    CHAT_SCRIPT,
    JOB_KILL_POINTS,
    JOB_KINDS,
    job_schedules,
    status_of,
)
from tests.crash.memory import MEMORY_KILL_POINTS, memory_answer, written_points
from tests.crash.streams import STREAM_KILL_POINTS, STREAM_SCRIPT, FileStreamer

EFFECTS = ("read_only", "idempotent_write", "non_idempotent", "non_idempotent_reconcile")

KILL_POINTS = (
    "after_queued",             # create_run: the inbound message is durable, nothing else
    "after_user_entry",         # the commit holding the UserMessage
    "after_intent",             # the commit holding the AssistantTurn with tool calls
    "in_model_call",            # the model is asked (every round before it is committed)
    "after_claim",              # non_idempotent only: the call is claimed, not yet run
    "in_tool_after_effect",     # inside the tool, its effect fsynced, before it returns
    "after_tool_result",        # the commit holding a ToolResult
    "after_pause",              # the commit moving the run to awaiting_approval (prompt unsent)
    "after_final_answer",       # the commit moving the run to completed (before delivery)
    "after_delivery_sent",      # inside the channel's send, posted, id not yet recorded
    "before_delivery_recorded", # mark_delivered called: posted (any channel), id not stored
    "after_delivery_recorded",  # mark_delivered: the remote id is stored
)

COMPACTION_KILL_POINTS = (
    "in_summary",               # --compaction: the model is summarising, nothing stored yet
    "after_summary",            # --compaction: the commit holding the summary notice
)

FAILED_KILL_POINTS = (
    "after_run_failed",         # the commit moving the run to failed, its notice unsent
)

VOTE_KILL_POINTS = (
    "before_vote_recorded",     # --vote: the click is in, nothing written
    "after_vote_recorded",      # --vote: the vote is written, the click not yet answered
)

COMMAND_KILL_POINTS = (
    "after_run_cancelled",      # --command stop: the run is cancelled, its notice unsent
    "after_delivery_sent",      # the notice is posted, its id not yet recorded
    "after_delivery_recorded",  # the notice's id is stored, the command not yet answered
)

SCHEDULE_COMMAND_KILL_POINTS = (
    "after_queued",             # --command "schedules run job": its run is queued, unanswered
    "after_final_answer",       # its run has answered, the command is not answered yet
    "after_schedule_saved",     # --command "schedules pause job": the pause is stored, unsaid
)

HOOK_KILL_POINTS = (
    "after_queued",             # --hook: the delivery's run is queued, the sender unanswered
    "after_final_answer",       # its run has answered (into the chat), the sender not yet
    "after_delivery_sent",      # the answer is posted, its id not yet recorded
)

CHANNEL = "testchat"
ORIGIN = Origin(channel=CHANNEL, target={"room": "r1"}, user="u1")
PLACED = Origin(channel=CHANNEL, target={"room": "r1", "channel": "r1"}, user="u1")
"""``--placed``: the room is also the place a command is typed in (``channels.commands``
finds a place's runs by ``target["channel"]``)."""
TOOL_NAME = "effect_tool"
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": TOOL_NAME, "arguments": {"n": 1}},
                    {"name": TOOL_NAME, "arguments": {"n": 2}}]},
    {"text": "done"},
]
MAX_RECOVERY_ATTEMPTS = 3
SUMMARY_TEXT = "The weekly summary."


def send_message_script(channel: str) -> list[dict[str, Any]]:
    """``--send-message``: one post with the built-in, then the answer."""
    return [{"tool_calls": [{"name": "send_message",
                             "arguments": {"target": f"slack:{channel}", "text": SUMMARY_TEXT}}]},
            {"text": "done"}]

JOB = "job"
"""The schedule ``--fire`` defines."""
JOB_PROMPT = "go"
FIRE_LEAD = timedelta(seconds=5)
"""On a fresh store, how long before the slot the scheduler starts."""

CALLS_FILE = "calls.jsonl"
EFFECTS_FILE = "effects.jsonl"
CHANNEL_FILE = "channel.jsonl"
COMMANDS_FILE = "commands.jsonl"
REQUESTS_FILE = "requests.jsonl"
STREAMS_FILE = "streams.json"


class KillSwitch:
    """SIGKILLs this process at the ``count``-th time ``point`` is reached."""

    def __init__(self, point: str | None, count: int = 1) -> None:
        self.point = point
        self.count = count
        self.seen = 0

    def reached(self, point: str) -> None:
        if point != self.point:
            return
        self.seen += 1
        if self.seen == self.count:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a trace file ([] if it does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable before going on."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


class _Crashing:
    """Mixed into a real store: the process dies right after the write a kill point names."""

    switch: KillSwitch

    async def create_run(self, run: Run) -> Run:
        stored: Run = await super().create_run(run)  # type: ignore[misc]
        self.switch.reached("after_queued")
        return stored

    async def index_file(self, file: IndexedFile, pieces: Sequence[Piece]) -> None:
        await super().index_file(file, pieces)  # type: ignore[misc]
        self.switch.reached("after_file_indexed")  # tests/crash/knowledge.py

    async def accept_run(self, run: Run) -> Accepted:
        # Committed (its flush perhaps still under way: a kill -9 loses nothing of it).
        accepted: Accepted = await super().accept_run(run)  # type: ignore[misc]
        inherited = super().accept_run.__func__  # type: ignore[misc]
        if inherited is not RunStore.accept_run:  # (else its create_run said so)
            self.switch.reached("after_queued")
        return accepted

    async def commit(self, checkpoint: Checkpoint) -> None:
        await super().commit(checkpoint)  # type: ignore[misc]
        cp = checkpoint
        if any(isinstance(e, UserMessage) for e in cp.entries):
            self.switch.reached("after_user_entry")
        if any(isinstance(e, AssistantTurn) and e.tool_calls for e in cp.entries):
            self.switch.reached("after_intent")
        if cp.run is not None and not cp.entries and not cp.transitions \
                and cp.run.started_calls:
            self.switch.reached("after_claim")
        if any(isinstance(e, ToolResult) for e in cp.entries):
            self.switch.reached("after_tool_result")
        if any(t.target is RunState.AWAITING_APPROVAL for t in cp.transitions):
            self.switch.reached("after_pause")
        if any(t.target is RunState.COMPLETED for t in cp.transitions):
            self.switch.reached("after_final_answer")
        if any(t.target is RunState.FAILED for t in cp.transitions):
            self.switch.reached("after_run_failed")
        if any(t.target is RunState.CANCELLED for t in cp.transitions):
            self.switch.reached("after_run_cancelled")
        if any(isinstance(e, Notice) and e.code == "summary" for e in cp.entries):
            self.switch.reached("after_summary")
        if any(isinstance(d, StreamDelivery) for d in cp.deliveries):
            self.switch.reached("after_stream_opening")

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        when = "recorded" if state == "streaming" else "finished"
        self.switch.reached(f"before_stream_{when}")
        await super().stream_progress(key, state, remote_ids, at)  # type: ignore[misc]
        self.switch.reached(f"after_stream_{when}")

    async def put_blob(self, data: bytes, media_type: str, at: float) -> Any:
        stored = await super().put_blob(data, media_type, at)  # type: ignore[misc]
        self.switch.reached("after_blob_stored")
        return stored

    async def put_memory(self, memory: Any, call: str | None = None) -> bool:
        before, after = written_points(call)  # tests/crash/memory.py
        self.switch.reached(before)
        written: bool = await super().put_memory(memory, call)  # type: ignore[misc]
        self.switch.reached(after)
        return written

    async def put_vote(self, vote: Vote) -> bool:
        self.switch.reached("before_vote_recorded")
        written: bool = await super().put_vote(vote)  # type: ignore[misc]
        self.switch.reached("after_vote_recorded")
        return written

    async def save_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        await super().save_schedules(records)  # type: ignore[misc]
        self.switch.reached("after_schedule_saved")

    async def advance_schedules(self, marks: Sequence[SlotMark]) -> None:
        await super().advance_schedules(marks)  # type: ignore[misc]
        self.switch.reached("after_slot_recorded")

    async def upload_started(self, key: str, upload_id: str) -> None:
        self.switch.reached("before_upload_recorded")
        await super().upload_started(key, upload_id)  # type: ignore[misc]
        self.switch.reached("after_upload_recorded")

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        if self.switch.point == "after_upload_completed":
            pending: list[Delivery] = await super().deliveries(pending=True)  # type: ignore[misc]
            if any(d.key == key and isinstance(d, FileDelivery) for d in pending):
                self.switch.reached("after_upload_completed")
        self.switch.reached("before_delivery_recorded")
        await super().mark_delivered(key, remote_id, at)  # type: ignore[misc]
        self.switch.reached("after_delivery_recorded")


class CrashingStore(_Crashing, SQLiteStore):
    def __init__(self, path: Path, switch: KillSwitch) -> None:
        super().__init__(path)
        self.switch = switch


class CrashingFilesStore(_Crashing, FilesStore):
    def __init__(self, path: Path, switch: KillSwitch) -> None:
        super().__init__(path)
        self.switch = switch


class CrashingPostgresStore(_Crashing, PostgresStore):
    def __init__(self, dsn: str, schema: str, switch: KillSwitch) -> None:
        super().__init__(dsn, schema=schema)
        self.switch = switch


AnyStore = SQLiteStore | FilesStore | PostgresStore


def open_store(args: argparse.Namespace, switch: KillSwitch) -> AnyStore:
    """``--store``'s store over ``--db`` (a file, a folder, or a PostgreSQL schema)."""
    if args.store == "postgres":
        if not args.dsn:
            raise SystemExit("--store postgres needs --dsn")
        return CrashingPostgresStore(args.dsn, args.db, switch)
    if args.store == "files":
        return CrashingFilesStore(Path(args.db), switch)
    return CrashingStore(Path(args.db), switch)


class CompactingModel:
    """``--compaction``: a model whose context holds a few messages; it answers "answer N"
    and summarises when asked (where ``in_summary`` kills)."""

    model = "tiny"
    context_window = 260

    def __init__(self, switch: KillSwitch, memory: bool = False) -> None:
        self.switch = switch
        self.memory = memory

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        from runtime.engine.prompting import COMPACTION_PROMPT

        answer = memory_answer(request, self.switch) if self.memory else None
        if answer is not None:  # --memory: the flush, and remember when asked
            return answer
        if request.system == COMPACTION_PROMPT:
            self.switch.reached("in_summary")
            text = request.entries[0].text  # type: ignore[union-attr]
            return ModelResponse(text=f"SUMMARY of {text.count('user:')} messages")
        users = sum(isinstance(e, UserMessage) for e in request.entries)
        return ModelResponse(text=f"answer with {users} messages in view")


def traced(path: Path) -> OtelTracing:
    """Tracing whose spans are each appended to ``path`` as they end, one JSON line each,
    written at once (a kill -9 loses only the spans that had not ended)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = path.open("a", buffering=1)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    return OtelTracing(provider)


class AskedModel:
    """The model, reaching ``in_model_call`` each time it is asked (every round before it
    is committed: a kill there loses nothing). Each request is written to ``requests``
    as the OpenAI wire would send it (its messages' roles and contents)."""

    def __init__(self, model: Any, switch: KillSwitch, requests: Path) -> None:
        self.model = model
        self.switch = switch
        self.requests = requests

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelResponse:
        from runtime.providers.openai import to_messages

        append_line(self.requests, {"messages": [
            {"role": m["role"], "content": m.get("content")}
            for m in to_messages(request.entries)]})
        self.switch.reached("in_model_call")
        response: ModelResponse = await self.model.complete(request, on_text)
        return response


class FileChannel:
    """A chat channel whose messages are lines in a file; each carries the delivery key."""

    max_chars: int | None = None

    def __init__(self, path: Path, switch: KillSwitch,
                 streamer: FileStreamer | None = None) -> None:
        self.path = path
        self.switch = switch
        self.streamer = streamer

    async def send(self, delivery: Delivery) -> str:
        message_id = f"msg-{len(read_lines(self.path)) + 1}"
        record = {"id": message_id, "kind": delivery.kind, "key": delivery.key,
                  "run_id": delivery.run_id, "target": delivery.target, "text": delivery.text}
        if isinstance(delivery, ApprovalDelivery):
            record["tool_call_id"] = delivery.tool_call_id
        if isinstance(delivery, ReplyDelivery) and delivery.feedback:
            record["feedback"] = delivery.run_id  # it carries the run's 👍 / 👎
        append_line(self.path, record)
        self.switch.reached("after_delivery_sent")
        return message_id

    async def upload(self, delivery: FileDelivery, data: bytes, started: UploadStarted
                     ) -> str:
        message_id = f"file-{len(read_lines(self.path)) + 1}"
        append_line(self.path, {"id": message_id, "kind": "file", "key": delivery.key,
                                "run_id": delivery.run_id, "target": delivery.target,
                                "text": delivery.file.name, "size": len(data),
                                "sha256": hashlib.sha256(data).hexdigest()})
        self.switch.reached("after_file_uploaded")
        return message_id

    async def reconcile(self, delivery: Delivery) -> str | None:
        for line in read_lines(self.path):
            if line["key"] == delivery.key:
                return str(line["id"])
        return None


def make_tool(
    effect_class: str, workdir: Path, switch: KillSwitch, *, requires_approval: bool = False,
    report: Callable[[], Any] | None = None,
) -> Tool:
    """``effect_tool`` with the given effect class, tracing itself into ``workdir``
    (``report``: what it returns, and its effect records, instead of its call's key and
    ``n``: a check whose output changes only when what it checks does)."""
    calls, effects = workdir / CALLS_FILE, workdir / EFFECTS_FILE
    reconciling = effect_class == "non_idempotent_reconcile"
    effect = cast(Effect, "non_idempotent" if reconciling else effect_class)

    @tool(name=TOOL_NAME, effect=effect, requires_approval=requires_approval)
    def effect_tool(ctx: ToolContext, n: int) -> dict[str, Any]:
        """Do something countable."""
        result = {"n": n, "key": ctx.idempotency_key, "ok": True} if report is None \
            else report()
        append_line(calls, {"key": ctx.idempotency_key, "call": len(read_lines(calls)) + 1,
                            "n": n})
        if effect == "idempotent_write":
            # Like a real idempotent API: a key seen before is not applied again.
            if all(line["key"] != ctx.idempotency_key for line in read_lines(effects)):
                append_line(effects, {"key": ctx.idempotency_key, "n": n, "result": result})
        elif effect == "non_idempotent":
            append_line(effects, {"key": ctx.idempotency_key, "n": n, "result": result})
        switch.reached("in_tool_after_effect")
        return result

    if reconciling:
        @effect_tool.reconcile
        def _find(ctx: ToolContext) -> Any:
            for line in read_lines(effects):
                if line["key"] == ctx.idempotency_key:
                    return line["result"]
            return NOT_DONE

    return effect_tool


async def command(store: AnyStore, runtime: Runtime, words: str,
                  workdir: Path) -> None:
    """``/maiden WORDS`` asked by u1 in room r1, as a platform's adapter asks it (with every
    right; the same words are the same request, as a platform's retry of it is); what the
    person is told is appended to ``commands.jsonl``. ``schedules`` commands see one
    schedule, ``job`` (daily at 09:00 UTC, the prompt ``go``, delivered nowhere), on a
    clock standing at 08:00 (its run of ``schedules run job`` is waited for)."""
    from channels.commands import Asked, Commands, parse
    from schedules import ScheduleBook, ScheduleConfig, Scheduler, load_schedules

    asked = Asked(words=parse(words), user="u1", channel=CHANNEL, place="r1",
                  request=f"drill:{words}")
    defined = load_schedules([ScheduleConfig(name=JOB, cron="0 9 * * *", prompt=JOB_PROMPT)],
                             default_timezone="UTC", channels=[])
    clock = FixedClock(datetime(2026, 1, 5, 8, 0, tzinfo=UTC))
    scheduler = Scheduler(ScheduleBook(store, defined, clock=clock), runtime, clock=clock,
                          timers=False)
    try:
        await scheduler.start()
        answer = await Commands(runtime, scheduler).answer(asked, lambda right: True)
        for run in await store.list_runs():
            await runtime.wait(run.id)
    finally:
        await scheduler.close()
    append_line(workdir / COMMANDS_FILE, {"text": answer.text, "announce": answer.announce})


HOOK_SECRET = "drill-secret"
HOOKS_FILE = "hooks.jsonl"


async def hook(store: AnyStore, runtime: Runtime, delivery: str,
               workdir: Path) -> None:
    """A signed delivery of the webhook ``gh`` (its prompt from the payload, its answer
    into room r1 of the test chat), as ``POST /v1/hooks/gh`` takes it, with the delivery id
    ``delivery`` (the same id again is a sender's redelivery); its run waited for; what the
    sender is told is appended to ``hooks.jsonl``."""
    from schedules import ScheduleBook, Scheduler
    from schedules.hooks import Hook, HookConfig

    config = HookConfig(name="gh", secret_env="GH_SECRET", prompt="{pusher} pushed {ref}")
    gh = Hook(config, HOOK_SECRET.encode(), ORIGIN)
    body = json.dumps({"pusher": "ana", "ref": "main"}).encode()
    signature = hmac.new(HOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-Hub-Signature-256": f"sha256={signature}", "X-GitHub-Delivery": delivery}
    scheduler = Scheduler(ScheduleBook(store, hooks=[gh]), runtime, timers=False)
    run, again = await scheduler.hook("gh", body, headers)
    ended = await runtime.wait(run.id)
    append_line(workdir / HOOKS_FILE, {"run_id": run.id, "again": again,
                                      "state": ended.state.value})


async def summarise(store: AnyStore) -> dict[str, Any]:
    """What ``maiden runs`` / ``maiden show`` would tell: runs, transitions, threads, outbox."""
    runs = []
    for run in await store.list_runs():
        data = run.model_dump(mode="json")
        data["transitions"] = [t.model_dump(mode="json") for t in await store.transitions(run.id)]
        runs.append(data)
    threads = {info.id: [e.model_dump(mode="json") for e in await store.load_entries(info.id)]
               for info in await store.list_threads()}
    deliveries = [d.model_dump(mode="json") for d in await store.deliveries()]
    votes = [v.model_dump(mode="json") for v in await store.votes()]
    blobs = [b.model_dump(mode="json") for b in await store.blobs()]
    return {"runs": runs, "threads": threads, "deliveries": deliveries, "votes": votes,
            "blobs": blobs}


class FixedClock:
    """The schedules' clock: stands still until moved."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def job_schedule(slot: datetime, deliver: str | None) -> list[Any]:
    """``--fire``'s schedule ``job``: daily at ``slot``'s UTC time."""
    from schedules import ScheduleConfig, load_schedules

    slot = slot.astimezone(UTC)
    config = ScheduleConfig(name=JOB, cron=f"{slot.minute} {slot.hour} * * *",
                            prompt=JOB_PROMPT, deliver=deliver, misfire="once")
    return load_schedules([config], default_timezone="UTC", channels=["slack"])


async def fire(
    store: AnyStore, runtime: Runtime, slot: datetime, late: timedelta,
    defined: Sequence[Any], name: str = JOB,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``--fire``: claim ``slot`` of the schedule ``name`` (of ``defined``, or of the store)
    as a maiden process would, more than once, and wait for the run holding it; return
    every claim, and every schedule as the listings show it then (done, active)."""
    from schedules import Fired, ScheduleBook, Scheduler
    from schedules.status import statuses

    slot = slot.astimezone(UTC)
    clock = FixedClock(slot + late)
    book = ScheduleBook(store, defined, clock=clock)
    await book.load()
    fresh = book.record(name) is None
    if fresh:
        clock.now = slot - FIRE_LEAD  # up before the slot: the record starts now
    scheduler = Scheduler(book, runtime, clock=clock, timers=False)
    other = Scheduler(ScheduleBook(store, defined, clock=clock), runtime, clock=clock,
                      timers=False)
    claims: list[tuple[str, Sequence[Fired]]] = []
    try:
        claims.append(("start", await scheduler.start()))  # a restart's catch-up claims here
        claims.append(("other start", await other.start()))
        if fresh:
            clock.now = slot + late
            claims.append(("alarm", await scheduler.fire_due(woken=name)))
        claims.append(("duplicate", await scheduler.fire_due()))
        claims.append(("other", await other.fire_due()))
        for _, fired in claims:
            for f in fired:
                await runtime.wait(f.run.id)
        await runtime.idle()
        await book.load()
        listing = [{"name": s.schedule.name, "done": s.done, "active": s.active}
                   for s in await statuses(book)]
    finally:
        await scheduler.close()
        await other.close()
    return [{"by": by, "key": f.key, "slot": f.slot.isoformat(), "run_id": f.run.id}
            for by, fired in claims for f in fired], listing


async def main(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.workdir)
    switch = KillSwitch(args.kill_at, args.kill_count)
    async with open_store(args, switch) as store:
        tools = [make_tool(args.effect, workdir, switch,
                           requires_approval=args.requires_approval)]
        script = SCRIPT
        if args.send_message:
            # The built-in send_message instead: one post to Slack, then the answer.
            from runtime.builtins.send_message import make_send_message

            tools = [make_send_message()]
            script = send_message_script(args.send_message)
        if args.stream:
            script = STREAM_SCRIPT  # text in pieces, a tool call, then the answer in pieces
        if args.make_file:
            tools, script = [make_file], MAKE_FILE_SCRIPT
        services: dict[str, object] = {}
        if args.job == "tool":  # the check: its output is what it checks, not its key
            tools = [make_tool(args.effect, workdir, switch,
                               report=functools.partial(status_of, workdir))]
        if args.job == "chat":  # the model may ask for a reminder, on a clock of its own
            from schedules import ScheduleBook, schedule_tools

            tools, script = [*tools, *schedule_tools()], CHAT_SCRIPT
            services["schedules"] = ScheduleBook(store, clock=FixedClock(CHAT_NOW))
        model: Any = ScriptedProvider(script)
        agent = AgentConfig(max_recovery_attempts=MAX_RECOVERY_ATTEMPTS)
        if args.max_message_chars is not None:
            agent = agent.model_copy(update={"max_message_chars": args.max_message_chars})
        if args.compaction:
            # A model with a tiny context that answers plainly: long threads get summaries.
            model = CompactingModel(switch, memory=args.memory)
            agent = agent.model_copy(update={"compaction": "summary"})
        if args.memory:  # tests/crash/memory.py
            from runtime.builtins.memory import make_memory
            from runtime.model.config import MemoryConfig

            tools = [*tools, *make_memory(MemoryConfig())]
        caps = [CapConfig(scope="user", tokens=args.cap_tokens)] if args.cap_tokens else []
        tracing = traced(Path(args.trace_file)) if args.trace_file else NO_TRACING
        origin = PLACED if args.placed else ORIGIN
        deliver: str | None = None
        chat = FileChannel(workdir / CHANNEL_FILE, switch, FileStreamer(
            workdir / STREAMS_FILE, switch) if args.stream else None)
        deliverers: dict[str, Deliverer] = {CHANNEL: chat}
        shelf = Shelf(workdir, switch, down=1 if args.late_fetcher else 0)
        if args.slack:
            # Slack as the origin: the real deliverer against a fake Slack the test runs.
            from slack_sdk.web.async_client import AsyncWebClient

            from channels.slack.deliverer import SlackDeliverer

            url, token, channel, thread_ts = args.slack
            client = AsyncWebClient(token=token, base_url=url)
            from channels.slack.streamer import SlackStreamer

            deliverers["slack"] = SlackDeliverer(client, pace_s=0, streaming=functools.partial(
                SlackStreamer, append_every_s=0.05) if args.stream else None)
            from tests.fakes.slack.payloads import TEAM

            # As the Slack channel makes it: outside a DM a stream goes to the one who asked.
            origin = Origin(channel="slack", target={"team": TEAM, "channel": channel,
                                                     "thread_ts": thread_ts, "user": "U1"},
                            user="U1")
            deliver = f"slack:{channel}:{thread_ts}"
        if args.discord:
            # Discord as the origin: the real deliverer against a fake Discord the test runs.
            from discord.http import HTTPClient

            from channels.base import Link
            from channels.discord.channel import point_at
            from channels.discord.deliverer import DiscordDeliverer

            url, token, channel, message, guild = args.discord
            http = HTTPClient(asyncio.get_running_loop())
            point_at(http, url)
            me = await http.static_login(token)
            from channels.discord.streamer import DiscordStreamer

            deliverers["discord"] = DiscordDeliverer(
                http, link=Link(offline=None, bot=str(me["id"])),
                streaming=functools.partial(DiscordStreamer, edit_every_s=0.05)
                if args.stream else None)
            origin = Origin(channel="discord", target={"channel": channel, "message": message,
                                                       "guild": guild}, user="U1")
        asked = AskedModel(model, switch, workdir / REQUESTS_FILE)
        if args.late_fetcher:
            # A process without the channel's fetcher (a command that opens no channels)
            # starts first: its recovery leaves the run for one that has it, unrefused.
            async with Runtime(store, asked, ToolRegistry(tools), agent=agent, caps=caps,
                               channels=[CHANNEL]):
                pass
        runtime = Runtime(store, asked, ToolRegistry(tools), agent=agent, caps=caps,
                          tracing=tracing, services=services,
                          channels=[CHANNEL] if args.late_fetcher else None,
                          deliverers=deliverers, fetchers={CHANNEL: shelf})
        fired: list[dict[str, Any]] | None = None
        listing: list[dict[str, Any]] = []
        async with runtime:  # start(): recovers unfinished runs, flushes the outbox
            if args.fire:
                defined, name = job_schedules(args.job, args.fire, origin, TOOL_NAME) \
                    if args.job else (job_schedule(args.fire, deliver), JOB)
                fired, listing = await fire(store, runtime, args.fire,
                                            timedelta(seconds=args.late), defined, name)
            if args.send:
                thread_id, text = args.send
                run = await runtime.submit(thread_id, text, origin=origin,
                                           idempotency_key=args.key,
                                           fetch=sources(CHANNEL, args.file))
                await runtime.wait(run.id)
            decision = args.approve or args.deny
            if decision:
                run_id, call_id = decision
                await runtime.decide(run_id, call_id, approve=bool(args.approve),
                                     by="crash-test")
                await runtime.wait(run_id)
            if args.vote:
                user, value = args.vote
                (voted,) = await store.list_runs()
                await runtime.kept.feedback.vote(voted.id, value, user=user, channel=origin.channel)
            if args.command:
                await command(store, runtime, args.command, workdir)
            if args.hook:
                await hook(store, runtime, args.hook, workdir)
            await runtime.idle()
        if args.discord:
            await http.close()
        summary = await summarise(store)
        if args.memory:
            summary["memories"] = [m.model_dump(mode="json") for info in
                                   await store.list_threads()
                                   for m in await store.memories_of_thread(info.id)]
        if fired is not None:
            summary["fired"] = fired
            summary["listing"] = listing
            summary["schedules"] = [r.model_dump(mode="json")
                                    for r in await store.schedule_records()]
        return summary


def instant(text: str) -> datetime:
    """An ISO instant with its offset (``--fire``)."""
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset")
    return value


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.driver", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True,
                        help="the SQLite file, the files store's folder, or the PostgreSQL "
                             "schema")
    parser.add_argument("--store", choices=["sqlite", "files", "postgres"], default="sqlite")
    parser.add_argument("--dsn", help="--store postgres: the server (tests/postgres.py)")
    parser.add_argument("--effect", required=True, choices=EFFECTS)
    parser.add_argument("--workdir", required=True)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--send", nargs=2, metavar=("THREAD", "TEXT"))
    action.add_argument("--recover", action="store_true",
                        help="only start (recovering every unfinished run) and exit")
    action.add_argument("--fire", type=instant, metavar="SLOT",
                        help="fire the slot SLOT (ISO, with offset) of the schedule 'job' "
                             "(see above)")
    action.add_argument("--approve", nargs=2, metavar=("RUN", "CALL"))
    action.add_argument("--deny", nargs=2, metavar=("RUN", "CALL"))
    action.add_argument("--vote", nargs=2, metavar=("USER", "up|down"),
                        help="a person's click on the 👍 / 👎 of the store's one run")
    action.add_argument("--command", metavar="WORDS",
                        help="/maiden WORDS, by u1 in room r1 (channels.commands)")
    action.add_argument("--hook", metavar="DELIVERY",
                        help="a signed delivery of the webhook 'gh' with this delivery id "
                             "(see hook())")
    parser.add_argument("--job", choices=JOB_KINDS,
                        help="--fire: fire a job's schedule instead of 'job' (say: the "
                             "reminder 'remind' of the config; chat: the reminder 'nudge' "
                             "made from chat; tool: the check 'check'); --send chat: the "
                             "model asks for 'nudge' (tests/crash/jobs.py)")
    parser.add_argument("--placed", action="store_true",
                        help="--send from room r1 as a place, where --command looks")
    parser.add_argument("--key", help="--send: the inbound message's idempotency key")
    parser.add_argument("--late", type=float, default=5.0, metavar="SECONDS",
                        help="--fire: how long after the slot the alarm goes off, or a "
                             "restart starts (over 60: the slot counts as missed)")
    parser.add_argument("--requires-approval", action="store_true",
                        help="effect_tool asks a person before every call")
    parser.add_argument("--slack", nargs=4, metavar=("API_URL", "TOKEN", "CHANNEL", "THREAD_TS"),
                        help="messages come from Slack and are answered there (--fire: "
                             "the schedule delivers to THREAD_TS)")
    parser.add_argument("--send-message", metavar="SLACK_CHANNEL",
                        help="the model calls the built-in send_message to this Slack channel "
                             "(with --slack) instead of effect_tool")
    parser.add_argument("--discord", nargs=5,
                        metavar=("API_URL", "TOKEN", "CHANNEL", "MESSAGE", "GUILD"),
                        help="messages come from Discord and are answered there")
    parser.add_argument("--memory", action="store_true",
                        help="with --compaction: the memory built-in, its flush before each "
                             "summary, remember called for \"remember: ...\" "
                             "(tests/crash/memory.py)")
    parser.add_argument("--compaction", action="store_true",
                        help="a model with a tiny context window and compaction = summary "
                             "(kill points in_summary, after_summary)")
    parser.add_argument("--kill-at",
                        choices=sorted(set(KILL_POINTS + COMPACTION_KILL_POINTS
                                           + FAILED_KILL_POINTS + STREAM_KILL_POINTS
                                           + VOTE_KILL_POINTS + FILE_KILL_POINTS
                                           + COMMAND_KILL_POINTS
                                           + SCHEDULE_COMMAND_KILL_POINTS
                                           + HOOK_KILL_POINTS + JOB_KILL_POINTS
                                           + MEMORY_KILL_POINTS)))
    parser.add_argument("--max-message-chars", type=int, metavar="N",
                        help="[agent] max_message_chars (a longer --send is refused, told)")
    parser.add_argument("--cap-tokens", type=int, metavar="N",
                        help="a [[budgets]] cap: each person N tokens a day (a --send past it "
                             "is refused, told)")
    parser.add_argument("--kill-count", type=int, default=1)
    parser.add_argument("--trace-file", metavar="PATH",
                        help="traced: each finished span appended to PATH as a JSON line")
    parser.add_argument("--make-file", action="store_true",
                        help="the model calls make_file, whose report goes out with the answer")
    parser.add_argument("--file", action="append", default=[], metavar="NAME",
                        help="--send: the message carries DIR/shared/NAME, announced by its "
                             "channel and fetched as the run's first step (repeatable)")
    parser.add_argument("--late-fetcher", action="store_true",
                        help="a runtime without the testchat channel's file fetcher recovers "
                             "first; then one with it, whose first download finds it out of "
                             "reach")
    parser.add_argument("--stream", action="store_true",
                        help="the testchat channel streams replies (tests/crash/streams.py)")
    return parser.parse_args(argv)


def cli(argv: Sequence[str] | None = None) -> None:
    """The process: parse ``argv``, drive, print the summary (``python -m``, or forked by
    tests/crash/launch.py)."""
    arguments = parse(None if argv is None else list(argv))
    Path(arguments.workdir).mkdir(parents=True, exist_ok=True)
    print(json.dumps(asyncio.run(main(arguments)), sort_keys=True))


if __name__ == "__main__":
    cli()
