"""A job: a run whose first steps are fixed, not the model's (a reminder's words, a
scheduled check's tool call), so a slot that has nothing new to say spends no tokens.

The loop plays a job's steps as if a model had asked for them (``engine/jobs.py``): the
tool call is written ahead and run under its effect class, approval and crash rules like
any other; only a ``then_prompt`` ever reaches the model, and only when the check found
something new.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Job", "JobPost"]

JobPost = Literal["always", "on_change"]


class Job(BaseModel):
    """What a schedule or a hook asks of a run instead of a prompt: ``say`` (posted as
    it is), or ``tool`` with ``args`` (its output posted: ``always``, or ``on_change``
    only when it differs from the last run's of the same thread; with ``then_prompt``, the
    model is asked that about the output instead, only when it changed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    say: str | None = None
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    post: JobPost = "always"
    then_prompt: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Job:
        if (self.say is None) == (self.tool is None):
            raise ValueError("a job either says something (say) or runs a tool (tool)")
        if self.say is not None and not self.say.strip():
            raise ValueError("say: a reminder needs words")
        if self.say is not None and (self.args or self.then_prompt or self.post != "always"):
            raise ValueError("args, post and then_prompt go with tool, not with say")
        return self
