"""Turn each workload's result into table rows, with the issue's targets beside the figures."""

from __future__ import annotations

from .concurrency import BurstResult, ConcurrencyResult
from .memory import LONG_MESSAGES, MemoryResult
from .postgres import PostgresResult
from .replicas_report import replicas_rows
from .resume import ResumeResult
from .schedules import FIRE_WAYS, NEXT, SchedulesResult, StartupResult
from .slack import SlackResult
from .stream import BLOCK_S, StreamResult
from .table import Row, verdict
from .thread import median_range
from .thread_report import cpu_rows, flush_way_rows, sync_rows, thread_rows, traced_rows

__all__ = [
    "burst_rows",
    "concurrency_rows",
    "cpu_rows",
    "flush_way_rows",
    "memory_rows",
    "postgres_rows",
    "replicas_rows",
    "resume_rows",
    "schedules_rows",
    "slack_rows",
    "stream_rows",
    "sync_rows",
    "thread_rows",
    "traced_rows",
]

RESUME_MS = 5.0
RECOVER_S = 2.0
RECOVER_RUNS = 1_000
THREAD_MODE = 0.9
FLAT = 1.1
SLACK_ACK_MS = 100.0
STARTUP_S = 1.0
STARTUP_SCHEDULES = 1_000


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def resume_rows(r: ResumeResult) -> list[Row]:
    """Workload 3; the targets are for 10,000 entries and 1,000 runs, scaled for --quick."""
    name = "3 resume"
    recover_target = RECOVER_S * r.runs / RECOVER_RUNS
    return [
        Row(name, f"resume a {r.entries:,}-entry thread (cold, window): message accepted "
            "-> model request, ms", f"{r.resume_ms:.1f}", "", "", f"<= {RESUME_MS:g} ms",
            verdict(r.resume_ms, at_most=RESUME_MS),
            why="a cold start: the tail's rows read and validated on a fresh connection, the "
                "start checkpoint, and the first request built (bench/README.md)"),
        Row(name, "  the same from submitting the message (its commit and fsync), ms",
            f"{r.resume_send_ms:.1f}"),
        Row(name, "  entries in that request", f"{r.resume_entries:,}"),
        Row(name, f"cold load of the whole {r.entries:,}-entry thread, ms (median)",
            f"{r.load_ms:.1f}", f"{r.floor_load_ms:.1f}", _x(r.load_ms / r.floor_load_ms)),
        Row(name, "  the same, first load of the run, ms", f"{r.load_first_ms:.1f}"),
        Row(name, "  warm load (same store, rows cached), ms", f"{r.warm_load_ms:.2f}"),
        Row(name, f"start() recovering {r.runs:,} queued runs, s", f"{r.recover_s:.2f}", "", "",
            f"<= {recover_target:g} s", verdict(r.recover_s, at_most=recover_target),
            why=(f"{r.recover_cpu_s:.2f} s of it is CPU (the same without fsyncs): the runs go "
                 "one at a time under the global lock, each a whole message of the loop plus "
                 "its answer's fsync")),
        Row(name, "  per run recovered, ms", f"{r.recover_s * 1000 / r.runs:.2f}"),
        Row(name, "  the same without fsyncs (synchronous=off): the CPU, s",
            f"{r.recover_cpu_s:.2f}"),
        Row(name, '  the same with concurrency="thread", s', f"{r.recover_thread_s:.2f}"),
    ]


def concurrency_rows(results: list[ConcurrencyResult]) -> list[Row]:
    """Workload 4: messages/s against the ideal (threads in parallel, model latency only)."""
    rows = []
    for r in results:
        name = (f"4 concurrency, {r.threads} threads x {r.messages} msgs, "
                f"{r.latency_s * 1000:g} ms model")
        ideal = r.threads * r.messages / r.ideal_s
        target, ok = "", ""
        if r.mode == "thread":
            target, ok = f">= {THREAD_MODE:.0%} of ideal", verdict(r.fraction,
                                                                    at_least=THREAD_MODE)
        rows.append(Row(name, f'concurrency="{r.mode}": messages/s', f"{r.per_second:.1f}",
                        f"{ideal:.1f}", f"{r.fraction:.1%}", target, ok, why=(
                            "the users move in lockstep (their model calls end together), "
                            "so each wave of checkpoints is served one after another on the "
                            "one event loop")))
    return rows


BURST = 3.0
"""Issue 31: many threads at once against one alone, messages/s (group commit shares
flushes)."""


def burst_rows(results: list[BurstResult]) -> list[Row]:
    """Workload 4, zero-latency model: what many threads at once get from group commit, with
    flushes where maiden puts them on this disk, and all on the writer's thread."""
    rows = []
    for r in results:
        name = f"4 concurrency, {r.threads} threads at once x {r.messages} msgs, 0 ms model"
        ratio, low, high = median_range(r.ratios)
        where = {"auto": "flushed by maiden's rule", "apart": "always flushed apart",
                 "loop": "flushed on the loop", "writer": "on the writer's thread"}[r.flush]
        if r.slow_disk_s:
            where += f", each flush {r.slow_disk_s * 1000:g} ms longer (a slower disk)"
        rows += [
            Row(name, f'concurrency="thread", {where}: messages/s (baseline: one thread; '
                f"median of {len(r.ratios)}, {low:.2f}-{high:.2f}x)",
                f"{r.many_per_second:.1f}", f"{r.one_per_second:.1f}", f"{ratio:.2f}x",
                f">= {BURST:g}x", verdict(ratio, at_least=BURST),
                why="the event loop's Python (~0.55 ms a message) is paid once per message "
                    "however many threads share a flush: on this fast disk (a flush takes "
                    "~0.15 ms) one thread is already mostly CPU, so many cannot go three "
                    "times as fast"),
            Row(name, "  messages per disk flush (the store's count)",
                f"{r.messages_per_flush:.2f}"),
        ]
    return rows


def memory_rows(results: list[MemoryResult]) -> list[Row]:
    """Workload 5: peak RSS per case, each against the empty-store case; the long threads
    against the shorter one (flat: the same peak whatever the thread's length)."""
    empty = next((r for r in results if r.case == "empty"), None)
    what = {"empty": "empty store, 1 message", "thread": "thread of {n:,} messages",
            "idle": "{n:,} idle threads in the store, 2 messages",
            "long": "thread of {n:,} entries, window, " + f"{LONG_MESSAGES} messages"}
    longs = [r for r in results if r.case == "long"]
    rows = []
    for r in results:
        if r.case == "long" and r is not longs[0]:
            ratio = r.peak_mb / longs[0].peak_mb
            rows.append(Row("5 memory", "peak RSS MB, " + what[r.case].format(n=r.n),
                            f"{r.peak_mb:.1f}", f"{longs[0].peak_mb:.1f}", _x(ratio),
                            f"<= {FLAT:g}x ({longs[0].n:,} entries)",
                            verdict(ratio, at_most=FLAT)))
            continue
        base = "" if empty is None or r is empty else f"{empty.peak_mb:.1f}"
        ratio_text = "" if not base or empty is None else _x(r.peak_mb / empty.peak_mb)
        rows.append(Row("5 memory", "peak RSS MB, " + what[r.case].format(n=r.n),
                        f"{r.peak_mb:.1f}", base, ratio_text))
    return rows


def slack_rows(r: SlackResult) -> list[Row]:
    """Workload 6: Slack acks while another run holds the global lock."""
    name = f"6 slack ack, {r.events} events, lock held"
    rows = []
    for p in (50, 99):
        m, b = r.percentile(r.maiden_ms, p), r.percentile(r.baseline_ms, p)
        rows.append(Row(name, f"ms from event to ack, p{p}", f"{m:.1f}", f"{b:.1f}",
                        _x(m / b) if b else "", f"< {SLACK_ACK_MS:g} ms" if p == 99 else "",
                        verdict(m, at_most=SLACK_ACK_MS) if p == 99 else ""))
    m, b = r.percentile(r.command_ms, 99), r.percentile(r.baseline_ms, 99)
    rows.append(Row(name, "ms from /maiden status to its answered ack, p99", f"{m:.1f}",
                    f"{b:.1f}", _x(m / b) if b else "", f"< {SLACK_ACK_MS:g} ms",
                    verdict(m, at_most=SLACK_ACK_MS)))
    return rows


def schedules_rows(r: SchedulesResult) -> list[Row]:
    """Workload 7: startup against parsing the crontabs alone (the target, 1 s for 1,000
    schedules, scaled for --quick); fire to run start against submitting the same runs (p50
    and p99: the median over the rounds; max: of every round)."""
    name = f"7 schedules, startup with {r.schedules:,}"
    target = STARTUP_S * r.schedules / STARTUP_SCHEDULES
    parse_us = r.parse_s * 1e6 / r.schedules

    def startup(what: str, s: StartupResult) -> list[Row]:
        us = s.total_s * 1e6 / s.schedules
        return [
            Row(name, f"{what}: load + start() + next {NEXT} fires, s", f"{s.total_s:.3f}",
                f"{r.parse_s:.3f}", _x(s.total_s / r.parse_s), f"< {target:g} s",
                verdict(s.total_s, at_most=target)),
            Row(name, "  per schedule, µs", f"{us:.0f}", f"{parse_us:.0f}", _x(us / parse_us)),
            Row(name, "  configs validated + load_schedules, ms", f"{s.load_ms:.1f}"),
            Row(name, "  ScheduleBook + Scheduler.start(), ms", f"{s.start_ms:.1f}"),
            Row(name, f"  next_fires(cron, now, {NEXT}) each, ms", f"{s.next_ms:.1f}"),
        ]

    rows = [*startup("fresh store", r.fresh), *startup("records in the store", r.again)]
    rows.append(Row(name, "  the same with timers=True (APScheduler jobs), s",
                    f"{r.timers.total_s:.3f}", f"{r.parse_s:.3f}",
                    _x(r.timers.total_s / r.parse_s), f"< {target:g} s",
                    verdict(r.timers.total_s, at_most=target)))
    name = f"7 schedules, {r.due} due in one minute"
    for result in r.latency:
        how = FIRE_WAYS[result.way].format(n=r.due)
        for p, label in ((50, "p50"), (99, "p99"), (100, "max")):
            m, b = result.typical(result.maiden_ms, p), result.typical(result.baseline_ms, p)
            measure = (f'concurrency="{result.mode}", {how}: ms to RunStarted, {label}'
                       if p == 50 else f"  {label}")
            rows.append(Row(name, measure, f"{m:.1f}", f"{b:.1f}", _x(m / b) if b else ""))
    return rows


POSTGRES = 2.0
"""Issue 31: PostgreSQL's ms per message against SQLite's."""


def postgres_rows(r: PostgresResult) -> list[Row]:
    """Workload 8: ms per message on PostgreSQL against the same on SQLite (issue 31: at most
    twice)."""
    name = f"8 postgres, N={r.n:,}"
    if r.skipped is not None:
        return [Row(name, f"skipped: {r.skipped}", "-")]
    half = len(r.sqlite_ms) // 2
    rows = []
    for label, part in (("first half", slice(0, half)), ("second half", slice(half, None)),
                        ("all", slice(None))):
        pg, lite = r.postgres_ms[part], r.sqlite_ms[part]
        pg_ms, lite_ms = sum(pg) / max(1, len(pg)), sum(lite) / max(1, len(lite))
        ratio = pg_ms / lite_ms if lite_ms else 0.0
        whole = label == "all"
        rows.append(Row(name, f"ms/message on PostgreSQL vs SQLite, {label}", f"{pg_ms:.2f}",
                        f"{lite_ms:.2f}", _x(ratio) if lite_ms else "",
                        f"<= {POSTGRES:g}x" if whole else "",
                        verdict(ratio, at_most=POSTGRES) if whole and lite_ms else "",
                        why="each commit is one round trip (maiden_checkpoint) and a new run "
                            "one statement, but every read is a round trip too (the worker "
                            "looks for the thread's runs before and after each)"))
    return rows


STREAM_FIRST_MS = 50.0
"""Slack: from the model's first token to the reply's first visible text (issue 26)."""


def _first_visible(name: str, platform: str, measured: StreamResult,
                   baseline: StreamResult) -> list[Row]:
    """p50 and p99 from the first token to the first visible text, and calls per reply."""
    rows: list[Row] = []
    for p in (50, 99):
        m = measured.percentile(measured.first_visible_ms, p)
        b = baseline.percentile(baseline.first_visible_ms, p)
        target = f"<= {STREAM_FIRST_MS:g} ms" if platform == "slack" else ""
        rows.append(Row(name, f"ms from first token to first visible text, p{p}",
                        f"{m:.1f}", f"{b:.1f}", _x(m / b) if b else "", target,
                        verdict(m, at_most=STREAM_FIRST_MS) if target else ""))
    rows.append(Row(name, "API calls per reply (mean)",
                    f"{sum(measured.calls) / len(measured.calls):.1f}",
                    f"{sum(baseline.calls) / len(baseline.calls):.1f}"))
    return rows


def stream_rows(results: list[StreamResult]) -> list[Row]:
    """Workload 11: time to the first visible text, streamed against the finished reply
    (``stream = "off"``) on the same platform, and the API calls a reply took; then the
    streamed reply with the lock held by another run against it with the lock free."""
    rows: list[Row] = []
    by = {(r.platform, r.mode): r for r in results if not r.held}
    held = {r.platform: r for r in results if r.held}
    for platform, mode in (("slack", "native"), ("discord", "edit")):
        live, off = by[(platform, mode)], by[(platform, "off")]
        rows += _first_visible(f"11 live replies, {platform}, "
                               f"{len(live.first_visible_ms)} replies", platform, live, off)
        busy = held.get(platform)
        if busy is None:
            continue
        name = f"11 live replies, {platform}, lock held by another run"
        rows += _first_visible(name, platform, busy, live)
        m = busy.percentile(busy.asked_to_visible_ms, 50)
        b = live.percentile(live.asked_to_visible_ms, 50)
        rows.append(Row(name, "ms from the mention to first visible text, p50 (the wait "
                              f"for the lock: about {BLOCK_S * 1000:g} ms)",
                        f"{m:.1f}", f"{b:.1f}", _x(m / b) if b else ""))
    return rows
