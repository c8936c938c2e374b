"""Why a slot due now is skipped instead of run: it cannot run here, or the run of an
earlier slot still waits for a person (``overlap = "skip"``). A skipped slot is recorded
with why, and costs nothing."""

from __future__ import annotations

from collections.abc import Sequence

from runtime import Agents, NotFound, Records, RunState

from .config import Schedule

__all__ = ["cannot_run", "still_running"]


def cannot_run(schedule: Schedule, agents: Agents, channels: Sequence[str] | None
               ) -> str | None:
    """Why a slot of ``schedule`` cannot run here: its agent, the tool its job runs (of
    its agent; without one, of any agent: the routes choose), or the channel it delivers
    to (``channels``: those configured; None: not known) is no longer configured (a chat
    schedule made before the config changed, a tool taken out); None if it can."""
    config = schedule.config
    agent = agents.get(config.agent) if config.agent is not None else None
    if config.agent is not None and agent is None:
        return f"its agent {config.agent!r} is not configured"
    if config.tool is not None and not any(
            config.tool in a.tools for a in ([agent] if agent is not None else agents)):
        whose = f"agent {config.agent!r}" if config.agent is not None else "any agent"
        return f"its tool {config.tool!r} is not one of {whose}'s tools"
    channel = schedule.origin.channel
    if schedule.origin.target and channels is not None and channel not in channels:
        return f"it delivers to {channel}, which is not configured"
    return None


async def still_running(schedule: Schedule, records: Records,
                        last_runs: Sequence[str | None]) -> str | None:
    """Why a slot of ``schedule`` due now is skipped: its last slot's run (``last_runs``:
    as this process and the record know it) waits for an approval (``overlap = "skip"``,
    the default); None if it may run. A run that is only queued or running is not waited
    on here: it ends by itself, and the slot's run follows it on the thread, as before."""
    if schedule.config.overlap == "queue":
        return None
    for run_id in sorted({i for i in last_runs if i}):
        try:
            run = await records.get_run(run_id)
        except NotFound:
            continue
        if run.state is RunState.AWAITING_APPROVAL:
            return f'the previous run {run.id} is still awaiting approval (overlap = "skip")'
    return None
