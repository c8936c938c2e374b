"""The soak's tools, one of each effect class (and ``tick``, the schedules' job, ``probe``,
a tool-only check's, and ``report``, which hands back a file), copied beside agent.toml as
a tools module.

Every execution appends one JSON line to the ledger ``CHAOS_LEDGER`` names (``O_APPEND``,
then fsync: a line written survives a SIGKILL the next instant): ``{tool, key, arguments,
pid, run, call, applied}``. ``applied`` says whether the call changed the world:
always for a ``non_idempotent`` tool (each call is an email, a payment, a deploy);
``note`` honours its idempotency key as an idempotent API does (applied once per key);
``look`` changes nothing. The invariants count these lines after the soak.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from runtime import NOT_DONE, ToolContext, ToolFile, tool

__all__ = ["charge", "deploy", "email", "look", "note", "probe", "report", "tick"]

# Every replica's tools write the one ledger the soak names (each replica has its home).
LEDGER = Path(os.environ.get("CHAOS_LEDGER", Path(__file__).resolve().parent / "ledger.jsonl"))
LOCK = LEDGER.with_suffix(".lock")
# A call takes time, as real ones do: a kill can land before its effect, or after it and
# before its result is recorded.
BEFORE_S, AFTER_S = 0.08, 0.08
PROBE_S = 150
"""What ``probe`` finds changes this often (wall clock): some slots of a check find
something new, some do not."""


def _write(ctx: ToolContext, name: str, arguments: dict[str, Any], applied: bool) -> None:
    line = json.dumps({"tool": name, "key": ctx.idempotency_key, "arguments": arguments,
                       "pid": os.getpid(), "run": ctx.run_id, "call": ctx.tool_call_id,
                       "thread": ctx.thread_id, "applied": applied, "at": time.time()})
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _applied(key: str) -> dict[str, Any] | None:
    if not LEDGER.exists():
        return None
    for line in LEDGER.read_text().splitlines():
        record = json.loads(line)
        if record["key"] == key and record["applied"]:
            return dict(record)
    return None


def _effect(ctx: ToolContext, name: str, tag: str, n: int) -> str:
    time.sleep(BEFORE_S)
    _write(ctx, name, {"tag": tag, "n": n}, applied=True)
    time.sleep(AFTER_S)
    return f"{name} {tag}#{n} done"


def _reconciled(ctx: ToolContext) -> Any:
    found = _applied(ctx.idempotency_key)
    if found is None:
        return NOT_DONE
    return f"{found['tool']} {found['arguments']['tag']}#{found['arguments']['n']} done"


@tool(effect="read_only")
def look(ctx: ToolContext, tag: str, n: int) -> str:
    """Read something; changes nothing."""
    time.sleep(BEFORE_S)
    _write(ctx, "look", {"tag": tag, "n": n}, applied=False)
    return f"look {tag}#{n} done"


@tool(effect="read_only")
def report(ctx: ToolContext, tag: str, n: int) -> ToolFile:
    """Build a report: a file handed back, which maiden uploads once with the answer (its
    name and bytes are the message's: chaos/files.py's ``report_name``, ``report_data``)."""
    time.sleep(BEFORE_S)
    _write(ctx, "report", {"tag": tag, "n": n}, applied=False)
    return ToolFile(f"report-{tag}.txt", "text/plain", f"chaos report for {tag}\n".encode())


@tool(effect="idempotent_write")
def note(ctx: ToolContext, tag: str, n: int) -> str:
    """Write a note, once per idempotency key (as an idempotent API would)."""
    time.sleep(BEFORE_S)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _write(ctx, "note", {"tag": tag, "n": n},
               applied=_applied(ctx.idempotency_key) is None)
    time.sleep(AFTER_S)
    return f"note {tag}#{n} done"


@tool(effect="non_idempotent")
def charge(ctx: ToolContext, tag: str, n: int) -> str:
    """Charge a customer: every call is a payment (a reconcile hook looks it up)."""
    return _effect(ctx, "charge", tag, n)


charge.reconcile(_reconciled)


@tool(effect="non_idempotent")
def email(ctx: ToolContext, tag: str, n: int) -> str:
    """Send an email: every call is one; no way to look it up (a crash mid-call asks a
    person)."""
    return _effect(ctx, "email", tag, n)


@tool(effect="non_idempotent", requires_approval=True)
def deploy(ctx: ToolContext, tag: str, n: int) -> str:
    """Deploy: a person approves each one first."""
    return _effect(ctx, "deploy", tag, n)


deploy.reconcile(_reconciled)


@tool(effect="non_idempotent")
def tick(ctx: ToolContext, tag: str, n: int) -> str:
    """A scheduled job's work (its slot's thread, or its run, names the slot): every call is
    one tick; a reconcile hook looks it up."""
    return _effect(ctx, "tick", tag, n)


tick.reconcile(_reconciled)


@tool(effect="non_idempotent")
def probe(ctx: ToolContext, tag: str, n: int) -> str:
    """A scheduled check's look at something that changes now and then: every call is one
    probe (a reconcile hook looks it up, and answers what it found then)."""
    status = int(time.time() // PROBE_S)
    time.sleep(BEFORE_S)
    _write(ctx, "probe", {"tag": tag, "n": n, "status": status}, applied=True)
    time.sleep(AFTER_S)
    return f"probe status {status}"


def _probed(ctx: ToolContext) -> Any:
    found = _applied(ctx.idempotency_key)
    return NOT_DONE if found is None else f"probe status {found['arguments']['status']}"


probe.reconcile(_probed)
