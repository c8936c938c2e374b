"""A job's fixed steps, played where the model's would be (``model/jobs.py``).

What step comes next is read from the run's own entries, as a scripted model's would:
a restarted process goes on from where the thread stands, and a job's tool call, written
ahead like a model's, is never run twice. The output is compared with the last output
of the same job in the thread that reached its end (posted, or found unchanged), so a
failed run's output is never taken for one already posted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model.entries import AssistantTurn, Entry, ToolCall, ToolResult
from ..model.jobs import Job

__all__ = ["JOB_MODEL", "UNCHANGED", "JobStep", "job_step"]

JOB_MODEL = "maiden:job"
"""The ``model`` of the turns a job plays (no tokens spent)."""

UNCHANGED = "Nothing new since the last run; nothing was posted."
"""The final words of a run whose check found nothing new (kept in the thread, not sent)."""

MAX_POSTED_CHARS = 3_000
"""Of a tool's output, at most this much is posted (the rest is in the thread)."""


@dataclass(frozen=True, slots=True)
class JobStep:
    """The job's next step: a tool call, or its final words (``quiet``: kept, not
    posted). None from ``job_step``: the model takes over (``then_prompt``)."""

    text: str = ""
    call: ToolCall | None = None
    quiet: bool = False


def job_step(job: Job, run_id: str, own: Sequence[Entry], earlier: Sequence[Entry]
             ) -> JobStep | None:
    """The step after ``own`` (the run's entries so far); ``earlier``, the thread's
    entries before them, for the last output of the same job."""
    turns = [e for e in own if isinstance(e, AssistantTurn)]
    if not turns:
        if job.say is not None:
            return JobStep(text=job.say)
        assert job.tool is not None
        return JobStep(call=ToolCall(id=f"job_{run_id}", name=job.tool,
                                     arguments=dict(job.args)))
    if len(turns) > 1 or turns[0].model != JOB_MODEL or not turns[0].tool_calls:
        return None  # the model has taken over
    result = next((e for e in own if isinstance(e, ToolResult)
                   and e.tool_call_id == turns[0].tool_calls[0].id), None)
    if result is None:
        return None  # not answered yet: the loop runs the call first, never here
    output = _text(result.content)
    if result.is_error:
        return JobStep(text=f"The check `{job.tool}` failed: {_clip(output)}")
    if job.post == "on_change" and output == last_output(job, earlier):
        return JobStep(text=UNCHANGED, quiet=True)
    if job.then_prompt is not None:
        return None
    return JobStep(text=_clip(output) or f"`{job.tool}` returned nothing.")


def last_output(job: Job, entries: Sequence[Entry]) -> str | None:
    """The output of the newest earlier run of ``job`` in the thread that got to its final
    words (None: none among ``entries``)."""
    ended: set[str] = set()
    for entry in reversed(entries):
        if isinstance(entry, AssistantTurn) and not entry.tool_calls:
            ended.add(entry.run_id)
        elif isinstance(entry, ToolResult) and entry.run_id in ended and \
                entry.name == job.tool and entry.tool_call_id == f"job_{entry.run_id}" and \
                not entry.is_error:
            return _text(entry.content)
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, indent=1)


def _clip(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_POSTED_CHARS:
        return text
    return text[:MAX_POSTED_CHARS].rstrip() + f"\n… ({len(text) - MAX_POSTED_CHARS:,} more " \
        "characters in the thread)"
