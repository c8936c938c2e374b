"""Workloads 1 and 2 as table rows: maiden against the rule's floor, the earlier floor's
ratio beside it, the commits and fsyncs a message, and the variants of the thread."""

from __future__ import annotations

from runtime.stores.sqlite.commit import FlushWay

from .syncs import SyncCounts
from .table import Row, verdict
from .thread import BLOCKS, ThreadResult, median_range

__all__ = ["cpu_rows", "flush_way_rows", "sync_rows", "thread_rows", "traced_rows"]

PER_MESSAGE = 2.0
"""Issue 49: maiden's ms per message against the rule's floor."""
GROWTH = 1.1
DB_SIZE = 2.5
COMMITS = 4
"""Issue 49's rule on the standard workload: accept, the turn, the result, the answer..."""
FSYNCS = 2
"""...of them flushed: the accept and the answer."""
CPU_MS = 1.2
"""Issue 31: maiden's ms per message with synchronous=off (no flushes: the CPU)."""
LOOP_BLOCK_MS = 1.0
"""Issue 31: the longest the event loop may wait for a disk flush (here: for any commit made
on it)."""
PER_MESSAGE_WHY = (
    "maiden's commits and fsyncs are counted in the rows below beside the floor's; what "
    "is left over the floor is the loop's Python (the CPU row) and where the flushes are "
    "made (the flush rows; bench/README.md)")


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _against_rule(what: str, counted: float, rule: int) -> str:
    """Why a count differs from the rule's (printed under the table)."""
    if counted > rule:
        return (f"maiden makes {counted:.2f} {what} a message where the rule needs {rule}: "
                "each one over is one the rule does not ask for (bench/README.md says which)")
    return (f"maiden makes {counted:.2f} {what} a message where the rule needs {rule}: a "
            "step's writes are held back for a later one")


def thread_rows(results: list[ThreadResult]) -> list[Row]:
    """Workloads 1 and 2: per-block cost against the floor (the first round), every round's
    ratio (median and range), the earlier floor's, growth, size, load, commits, fsyncs."""
    r = results[0]
    name = f"1+2 thread, N={r.n:,}"
    rows = []
    bounds = [round(b * r.n / BLOCKS) for b in range(BLOCKS + 1)]
    for b, (m, f) in enumerate(zip(r.maiden_ms, r.floor_ms, strict=True)):
        rows.append(Row(name, f"ms/message, msgs {bounds[b] + 1}-{bounds[b + 1]}", f"{m:.2f}",
                        f"{f:.2f}", _x(m / f), f"<= {PER_MESSAGE:g}x floor",
                        verdict(m / f, at_most=PER_MESSAGE), why=PER_MESSAGE_WHY))
    rounds = len(results)
    ratio, low, high = median_range([x.ratio for x in results])
    mean_m, _, _ = median_range([x.maiden_total_s * 1000 / x.n for x in results])
    mean_f, _, _ = median_range([x.floor_total_s * 1000 / x.n for x in results])
    rows.append(Row(name, f"ms/message, all (median of {rounds}, {low:.2f}-{high:.2f}x)",
                    f"{mean_m:.2f}", f"{mean_f:.2f}", _x(ratio), f"<= {PER_MESSAGE:g}x floor",
                    verdict(ratio, at_most=PER_MESSAGE), why=PER_MESSAGE_WHY))
    if all(x.aio_total_s for x in results):
        aio, aio_low, aio_high = median_range([x.aio_ratio for x in results])
        mean_a, _, _ = median_range([x.aio_total_s * 1000 / x.n for x in results])
        rows.append(Row(name, "  the same against the earlier floor (aiosqlite, 2 commits "
                        f"each flushed; median of {rounds}, {aio_low:.2f}-{aio_high:.2f}x)",
                        f"{mean_m:.2f}", f"{mean_a:.2f}", _x(aio)))
    growth_m, growth_f = r.maiden_ms[-1] / r.maiden_ms[0], r.floor_ms[-1] / r.floor_ms[0]
    rows += [
        Row(name, "last block / first block", _x(growth_m), _x(growth_f), "",
            f"<= {GROWTH:g}x", verdict(growth_m, at_most=GROWTH)),
        Row(name, "total s", f"{r.maiden_total_s:.1f}", f"{r.floor_total_s:.1f}",
            _x(r.maiden_total_s / r.floor_total_s)),
        Row(name, "database MB", f"{r.maiden_db / 1e6:.2f}", f"{r.floor_db / 1e6:.2f}",
            _x(r.maiden_db / r.floor_db), f"<= {DB_SIZE:g}x floor",
            verdict(r.maiden_db / r.floor_db, at_most=DB_SIZE),
            why="maiden keeps runs (each with its transitions) and indexes beside the entries; "
                "in a small database their fixed pages weigh more"),
        Row(name, f"cold load of the thread ({4 * r.n:,} entries), ms",
            f"{r.maiden_load_ms:.1f}", f"{r.floor_load_ms:.1f}",
            _x(r.maiden_load_ms / r.floor_load_ms)),
        *_count_rows(name, r),
        *_loop_rows(name, r),
    ]
    return rows


def _count_rows(name: str, r: ThreadResult) -> list[Row]:
    """Commits and fsyncs a message after the first (whose thread lease is new), as the
    store and the floor counted them, beside the rule's; judged rounded to a whole number:
    what is not a message's (the thread's lease renewed every few seconds, the log's
    first write after a checkpoint) adds a few hundredths."""
    return [
        Row(name, "transactions a message, warm (the store's count; the floor's)",
            f"{r.transactions:.2f}", f"{r.floor_transactions:.2f}", "",
            f"{COMMITS} (the rule)",
            verdict(round(r.transactions), at_most=COMMITS, at_least=COMMITS),
            why=_against_rule("commits", r.transactions, COMMITS)),
        Row(name, "fsyncs a message, warm (the store's count of disk flushes; the floor's)",
            f"{r.synced:.2f}", f"{r.floor_synced:.2f}", "", f"{FSYNCS} (the rule)",
            verdict(round(r.synced), at_most=FSYNCS, at_least=FSYNCS),
            why=_against_rule("fsyncs", r.synced, FSYNCS)),
        Row(name, "  synchronous switches a message", f"{r.switches:.2f}"),
    ]


def _loop_rows(name: str, r: ThreadResult) -> list[Row]:
    """How long maiden's writes and flushes held the event loop (issue 31)."""
    block_ms = r.counts.here_max_s * 1000
    flush_ms = r.counts.flushed_here_max_s * 1000
    gc_ms = max(r.collections, default=0.0) * 1000
    gc_slow = sum(took > 0.001 for took in r.collections)
    return [
        Row(name, "longest a write held the event loop, ms (without its flush)",
            f"{block_ms:.2f}", "", "", f"<= {LOOP_BLOCK_MS:g} ms",
            verdict(block_ms, at_most=LOOP_BLOCK_MS),
            why=f"{r.counts.here_slow} of {r.counts.here} writes on the loop took over 1 ms "
                f"without a flush; the longest collection of garbage in these messages took "
                f"{gc_ms:.2f} ms ({gc_slow} over 1 ms): one set off in a write's Python "
                "pauses the loop there (`maiden run` settles its heap at start, as the "
                "bench does; the collections are of what serving made)"),
        Row(name, "  commits on the loop (over 1 ms) / durable writes sent to the writer",
            f"{r.counts.here}", f"{r.counts.here_slow}", f"{r.counts.sent_there}"),
        Row(name, "  collections of garbage (over 1 ms) / the longest, ms",
            f"{len(r.collections)}", f"{gc_slow}", f"{gc_ms:.2f} ms"),
        Row(name, "longest flush made on the event loop, ms (the COMMIT; when idle, the disk "
                  "quick)",
            f"{flush_ms:.2f}", "", "", f"<= {LOOP_BLOCK_MS:g} ms",
            verdict(flush_ms, at_most=LOOP_BLOCK_MS),
            why="the disk turned slow during that flush: the ones after it went to the "
                "flushing thread until the disk was quick again"),
        Row(name, "  flushes made on the loop / of all the disk flushes",
            f"{r.counts.flushed_here}", f"{r.counts.synced}"),
    ]


def sync_rows(counts: SyncCounts) -> list[Row]:
    """The fsyncs a message as system calls (strace), maiden's beside the floor's."""
    name = "1+2 thread, fsyncs as system calls (strace)"
    if counts.skipped:
        return [Row(name, f"skipped: {counts.skipped}", "-")]
    return [
        Row(name, f"fsync/fdatasync calls a message, warm ({counts.messages:,} messages each, "
                  "untimed; WAL checkpoints' included)",
            f"{counts.per_message('maiden'):.2f}", f"{counts.per_message('floor'):.2f}", "",
            f"{FSYNCS} (the rule)"),
        Row(name, "  of them of the database file (WAL checkpoints)",
            f"{counts.per_message('maiden', counts.database):.2f}",
            f"{counts.per_message('floor', counts.database):.2f}"),
    ]


def cpu_rows(results: list[ThreadResult]) -> list[Row]:
    """The thread with ``synchronous=off``: no flushes, so what is left is the CPU."""
    r = results[0]
    name = f"1+2 thread, N={r.n:,}, CPU"
    ms, low, high = median_range([x.maiden_total_s * 1000 / x.n for x in results])
    floor, _, _ = median_range([x.floor_total_s * 1000 / x.n for x in results])
    return [Row(name, f"ms/message, synchronous=off (median of {len(results)}, "
                f"{low:.2f}-{high:.2f})", f"{ms:.2f}", f"{floor:.2f}", _x(ms / floor),
                f"<= {CPU_MS:g} ms", verdict(ms, at_most=CPU_MS),
                why="the loop's Python: a run is still a pydantic model written whole as JSON "
                    "at each checkpoint (writing only its changed columns is left to do)")]


def traced_rows(results: dict[str, list[ThreadResult]]) -> list[Row]:
    """The thread with ``[otel]`` tracing on against off (issue 32: off costs nothing, on is
    reported)."""
    off, on = results["off"], results["on"]
    name = f"1+2 thread, N={off[0].n:,}, traces"
    off_ms, _, _ = median_range([x.maiden_total_s * 1000 / x.n for x in off])
    on_ms, low, high = median_range([x.maiden_total_s * 1000 / x.n for x in on])
    return [Row(name, f"ms/message, tracing on (5 spans a message, batched; median of "
                f"{len(on)}, {low:.2f}-{high:.2f})", f"{on_ms:.2f}", f"{off_ms:.2f}",
                _x(on_ms / off_ms))]


def flush_way_rows(ways: dict[FlushWay, list[ThreadResult]]) -> list[Row]:
    """Durable writes flushed by maiden's rule (on the loop when it is idle and the disk
    quick, else apart), always apart, on the event loop's thread, and on the writer's
    thread, interleaved; each against the loop's (the fastest, on a fast disk)."""
    rows = []
    loop = ways["loop"]
    name = f"1+2 thread, N={loop[0].n:,}, where flushes are made"
    base, _, _ = median_range([x.maiden_total_s * 1000 / x.n for x in loop])
    what = {"auto": "by maiden's rule (on the loop when it is idle and the disk quick, else "
                    "apart; the writer's thread while others are ready)",
            "apart": "always flushed on a thread of their own",
            "loop": "flushed on the loop's thread", "writer": "written on the writer's thread"}
    for way, results in ways.items():
        ms, low, high = median_range([x.maiden_total_s * 1000 / x.n for x in results])
        longest = max(max(x.counts.here_max_s, x.counts.flushed_here_max_s)
                      for x in results) * 1000
        rows += [
            Row(name, f"ms/message, durable writes {what[way]} (median of {len(results)}, "
                f"{low:.2f}-{high:.2f})", f"{ms:.2f}", f"{base:.2f}" if way != "loop" else "",
                _x(ms / base) if way != "loop" else ""),
            Row(name, "  longest a commit (or its flush) held the loop, ms", f"{longest:.2f}"),
        ]
    return rows

