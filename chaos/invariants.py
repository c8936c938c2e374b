"""The invariants, checked once the system has settled, from the store (read through a
replica's HTTP API), the tools' ledger, the model's records and what the client saw.

Each check returns ``Violation``s; none is an assertion, so every one is reported.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import ASK, JOB, Model, answer_text
from .plan import TOOLS
from .sent import Sent

__all__ = ["INVARIANTS", "RESUMED", "Stored", "Violation", "check"]

INVARIANTS = {
    1: "every accepted message has exactly one run, ended (or awaiting approval), answered "
       "once in its place",
    2: "tool effects: non_idempotent at most once per key and exactly once when its result "
       "is recorded; idempotent_write applied once per key",
    3: "each schedule slot ran at most once, exactly once where the misfire policy says so, "
       "never while its schedule was paused",
    4: "nothing left running, queued or leased; no stream left open; each approval "
       "decided once",
    5: "no thread holds a message twice; every thread well-formed (results match calls)",
    6: "nothing acknowledged is lost",
    7: "a file shared is shown to the model and stored once by content; a tool's file is "
       "uploaded exactly once into its message's place",
}
TERMINAL = {"completed", "failed", "cancelled", "timed_out"}
RESUMED = "resumed by request"  # the reason of the state change a resume makes
ACTIVE = {"queued", "running", "awaiting_tool"}


@dataclass
class Violation:
    invariant: int
    thread: str
    run: str | None
    what: str
    at: float | None = None  # when its message was accepted (seconds into the soak)
    known: str | None = None  # a finding already written down in chaos/README.md


@dataclass
class Stored:
    """What the store holds once settled."""

    runs: list[dict[str, Any]]
    entries: dict[str, list[dict[str, Any]]]  # thread -> entries, oldest first
    ledger: list[dict[str, Any]]
    details: dict[str, dict[str, Any]]  # run id -> the run with its transitions
    leases: list[dict[str, Any]]  # unexpired: name, holder ("{instance}/{pid}@{host}")
    live: set[int]  # the pids of the replicas up
    held: set[str] = field(default_factory=set)
    """Runs whose answer stayed in the outbox longer than a thread's later messages wait
    behind one (``ORDER_HOLD_S``): by design, later answers may have gone before it."""

    def timed_out(self, run_id: str) -> bool:
        detail = self.details.get(run_id) or {}
        return any(t["target"] == "timed_out" for t in detail.get("transitions") or ())

    def answers_late(self, run_id: str) -> bool:
        """Whether the run answers out of its thread's order: when a person took it up
        again (its approval timed out and was decided late, or it was resumed), or after
        its answer was held in the outbox past the ordering's hold (``held``)."""
        if run_id in self.held:
            return True
        detail = self.details.get(run_id) or {}
        return any(t["target"] == "timed_out" or t["reason"] == RESUMED
                   for t in detail.get("transitions") or ())

    @staticmethod
    def read_ledger(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check(sent: dict[str, Sent], stored: Stored, model: Model) -> list[Violation]:
    """Invariants 1, 2, 4, 5 and 6 (3, the schedule slots, is chaos/schedules.py's)."""
    out: list[Violation] = []
    out += _messages(sent, stored)
    out += _effects(stored)
    out += _left_over(sent, stored)
    out += _threads(sent, stored, model)
    return out


def _tag(text: str) -> str | None:
    found = ASK.match(text)
    return found.group(1) if found else None


def _messages(sent: dict[str, Sent], stored: Stored) -> list[Violation]:
    """Invariants 1 and 6: one run per accepted message, ended, answered once."""
    out: list[Violation] = []
    runs_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in stored.runs:
        runs_of[run["text"]].append(run)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entries in stored.entries.values():
        for e in entries:
            by_run[e["run_id"]].append(e)
    for s in sent.values():
        op, runs = s.op, runs_of.get(s.op.text, [])
        if s.refused is not None:
            out.append(Violation(1, s.thread, s.run_id, f"{op.tag} refused: {s.refused}",
                                 s.accepted_at))
        if s.run_id is None and not s.acked:
            if len(runs) > max(1, s.typed):
                out.append(Violation(1, s.thread, None, f"{op.tag} (never acknowledged) has "
                                     f"{len(runs)} runs"))
            continue
        seen = {a.run_id for a in s.answers} - {s.run_id}
        if seen:
            out.append(Violation(1, s.thread, s.run_id, f"{op.tag} was sent again with its "
                                 f"Idempotency-Key and answered with other runs: {seen}",
                                 s.accepted_at))
        ids = [r["run_id"] for r in runs]
        if 1 < len(ids) <= s.typed:
            continue  # typed again after a failure that did not say: each a message
        if s.run_id is None and len(ids) == 1:  # a Slack event: its run is found by its text
            s.run_id = ids[0]
        if ids != [s.run_id]:
            inv = 6 if not ids else 1
            out.append(Violation(inv, s.thread, s.run_id, f"{op.tag} was acknowledged "
                                 f"({op.route}) as run {s.run_id}; the store has runs {ids}",
                                 s.accepted_at))
            continue
        run, run_id = runs[0], str(runs[0]["run_id"])
        if run["thread_id"] != s.thread:
            out.append(Violation(1, s.thread, s.run_id,
                                 f"{op.tag}'s run is on thread {run['thread_id']}"))
        state = run["state"]
        if state not in TERMINAL and not (state == "awaiting_approval" and run["approval"]):
            out.append(Violation(1, s.thread, s.run_id, f"{op.tag}'s run is {state} "
                                 f"({run['reason']})", s.accepted_at))
        mine = by_run.get(run_id, [])
        finals = [e for e in mine if e["kind"] == "assistant" and not e["tool_calls"]
                  and e["text"]]
        results = sum(1 for e in mine if e["kind"] == "tool_result")
        users = [e for e in mine if e["kind"] == "user"]
        if state == "completed":
            want = answer_text(op.tag, results)
            if len(users) != 1:
                out.append(Violation(6, s.thread, s.run_id, f"{op.tag} completed with "
                                     f"{len(users)} user entries", s.accepted_at))
            if [e["text"] for e in finals] != [want] or run["reply"] != want:
                out.append(Violation(1, s.thread, s.run_id, f"{op.tag} completed: answers "
                                     f"{[e['text'] for e in finals]}, reply {run['reply']!r}, "
                                     f"expected {want!r}", s.accepted_at))
            for answer in s.answers:
                if answer.state == "completed" and answer.reply not in (want, None):
                    out.append(Violation(1, s.thread, s.run_id, f"{op.tag}: the client was "
                                         f"answered {answer.reply!r}, not {want!r}",
                                         s.accepted_at))
        elif len(finals) > 1:
            out.append(Violation(1, s.thread, s.run_id, f"{op.tag} is {state} with "
                                 f"{len(finals)} answers", s.accepted_at))
    return out


def _effects(stored: Stored) -> list[Violation]:
    """Invariant 2, from the ledger and the calls and results in the store."""
    out: list[Violation] = []
    calls: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}  # (run, call) -> thread, call
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for thread, entries in stored.entries.items():
        for e in entries:
            if e["kind"] == "assistant":
                for c in e["tool_calls"]:
                    calls[(e["run_id"], c["id"])] = (thread, c)
            elif e["kind"] == "tool_result":
                results[(e["run_id"], e["tool_call_id"])] = e
    applied: Counter[str] = Counter(r["key"] for r in stored.ledger if r["applied"])
    executed: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in stored.ledger:
        executed[(r["run"], r["call"])].append(r)
        where = calls.get((r["run"], r["call"]))
        thread = where[0] if where else "?"
        if where is None:
            out.append(Violation(2, thread, r["run"], f"{r['tool']} ran (pid {r['pid']}) for "
                                 f"call {r['call']}, which no thread records"))
        if r["key"] != hashlib.sha256((r["run"] + r["call"]).encode()).hexdigest():
            out.append(Violation(2, thread, r["run"], f"{r['tool']} call {r['call']} ran "
                                 f"with key {r['key'][:12]}…, not sha256(run + call)"))
    for key, count in applied.items():
        if count > 1:
            lines = [r for r in stored.ledger if r["key"] == key and r["applied"]]
            where = calls.get((lines[0]["run"], lines[0]["call"]))
            out.append(Violation(2, where[0] if where else "?", lines[0]["run"],
                                 f"{lines[0]['tool']} call {lines[0]['call']} took effect "
                                 f"{count} times (pids {[r['pid'] for r in lines]})"))
    for (run, call_id), result in results.items():
        thread, call = calls.get((run, call_id), ("?", {"name": result["name"]}))
        effect = TOOLS.get(call["name"])
        ran = [r for r in executed.get((run, call_id), []) if r["applied"]]
        if effect == "non_idempotent" and not result["is_error"] and len(ran) != 1:
            out.append(Violation(2, thread, run, f"{call['name']} call {call_id} has a result "
                                 f"recorded ({str(result['content'])[:80]}) and took effect "
                                 f"{len(ran)} times"))
        if effect == "idempotent_write" and not result["is_error"] and len(ran) != 1:
            out.append(Violation(2, thread, run, f"note call {call_id} has a result and was "
                                 f"applied {len(ran)} times"))
    return out


def _left_over(sent: dict[str, Sent], stored: Stored) -> list[Violation]:
    """Invariant 4: nothing still active, no stream left open, one decision per ask."""
    out = [Violation(4, r["thread_id"], r["run_id"], f"run left {r['state']} ({r['reason']})")
           for r in stored.runs if r["state"] in ACTIVE]
    for s in sent.values():
        out += [Violation(4, s.thread, s.run_id, f"{s.op.tag}: a {s.op.route} stream "
                          f"ended with no end event while its replica was up ({where})",
                          s.accepted_at) for where in s.open_streams]
    for lease in stored.leases:
        pid = lease["holder"].partition("/")[2].partition("@")[0]
        if lease["name"].startswith("thread:") and (not pid.isdigit() or int(pid) not in
                                                    stored.live):
            out.append(Violation(4, lease["name"][7:], None, f"its lease is held by "
                                 f"{lease['holder']}, not a replica that is up, for "
                                 f"{lease['expires_in']:.1f} s more"))
        elif lease["name"].startswith("thread:"):
            out.append(Violation(4, lease["name"][7:], None, f"its lease is still held by "
                                 f"{lease['holder']} with nothing left to run"))
    for r in stored.runs:
        per_call: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for d in r.get("decisions") or ():
            per_call[d["tool_call_id"]].append(d)
        for call, decisions in per_call.items():
            consumed = sum(1 for d in decisions if d["consumed"])
            if len(decisions) > 1 + consumed:
                out.append(Violation(4, r["thread_id"], r["run_id"], f"call {call} decided "
                                     f"{len(decisions)} times: "
                                     f"{[(d['approve'], d['by']) for d in decisions]}"))
    return out


CHECKING = "(scheduled check: "
"""What a tool-only job's runs carry as their message (the same at every slot)."""


def _threads(sent: dict[str, Sent], stored: Stored, model: Model) -> list[Violation]:
    """Invariant 5: each message once, in its own thread; results after their calls."""
    out: list[Violation] = []
    created = {r["run_id"]: r["created_at"] for r in stored.runs}
    texts: dict[str, set[str]] = defaultdict(set)
    typed: dict[str, int] = {}  # a message typed again (``maiden send``): how often at most
    for s in sent.values():
        texts[s.thread].add(s.op.text)
        typed[s.op.text] = s.typed
    for thread, entries in stored.entries.items():
        # A schedule's prompt comes back at every slot (its own thread's, or the one it
        # was made in): each slot once is invariant 3's.
        # So does a tool-only check's (chaos/jobs.py).
        users = Counter(e["text"] for e in entries if e["kind"] == "user"
                        and not JOB.match(e["text"]) and not e["text"].startswith(CHECKING))
        out += [Violation(5, thread, None, f"the message {text!r} is in it {n} times")
                for text, n in users.items() if n > max(1, typed.get(text, 0))]
        for e in entries:
            tag = _tag(e["text"]) if e["kind"] == "user" else None
            if tag and e["text"] not in texts[thread]:
                out.append(Violation(5, thread, e["run_id"], f"{tag} is not its message"))
        order = [e["run_id"] for e in entries if e["kind"] == "user"]
        if order != sorted(order, key=lambda run: created.get(run, 0.0)):
            out.append(Violation(5, thread, None, "its messages are not in the order their "
                                 "runs were accepted"))
        # Calls by run: a message typed again has a run of its own with the same call ids.
        open_calls: dict[tuple[str, str], str] = {}
        answered: set[tuple[str, str]] = set()
        for e in entries:
            if e["kind"] == "assistant":
                open_calls.update({(c["id"], e["run_id"]): e["run_id"]
                                   for c in e["tool_calls"]})
            elif e["kind"] == "tool_result":
                call = (e["tool_call_id"], e["run_id"])
                if call not in open_calls or call in answered:
                    out.append(Violation(5, thread, e["run_id"], f"a result for call "
                                         f"{call[0]} with no call before it, or a second one"))
                answered.add(call)
        states = {r["run_id"]: r for r in stored.runs}
        for (call_id, _), run in open_calls.items():
            r = states.get(run)
            waiting = r is not None and (r.get("approval") or {}).get("tool_call_id") == call_id
            if (call_id, run) not in answered and not waiting:
                out.append(Violation(5, thread, run, f"call {call_id} has no result (run "
                                     f"{r['state'] if r else '?'})"))
    out += [Violation(5, "?", None, f"the model was sent a request the real API refuses: {m}")
            for m in model.malformed]
    out += [Violation(5, "?", None, f"the model was asked with no message of ours last: {m}")
            for m in model.unknown]
    return out
