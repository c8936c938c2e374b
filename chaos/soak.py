"""One pass of the soak: build the system for a plan, run its workload and faults, let
it settle, read the store and check the invariants."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import httpx

from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack

from .client import Client
from .delivering import check_delivered, delivered_summary, delivering_toml, with_jobs_channel
from .discord import (
    DiscordPeople,
    check_discord,
    check_registered,
    discord_env,
    discord_summary,
    discord_toml,
    discord_world,
)
from .discord_acts import DiscordActor
from .discord_checks import check_discord_acts, discord_acts_summary
from .discord_resume import GatewayResume
from .disk import SmallDisk
from .faults import Faults
from .files import FILES_TOML
from .files_checks import check_downloads, check_files, files_summary
from .holds import Holds
from .hooks import HOOK_SECRET, hooks_toml
from .invariants import ACTIVE, Stored, check
from .jobs import check_jobs, jobs_summary, jobs_toml
from .model import Model
from .operators import Operators
from .outages import DiskFull, Outage, ServerRestart
from .pgserver import OwnServer
from .plan import Plan
from .proxy import Proxy
from .report import Outcome, summary, violations
from .schedules import Schedules, read_kept, schedules_toml
from .slack import SlackPeople, slack_env, slack_toml
from .slack_checks import check_acts, check_slack, slack_summary
from .store_reads import open_store, outbox_sent, read_blobs, read_held_long, read_leases
from .system import OUTSIDER, ROOT, History, Replica, StoreSpec, token_of, write_home
from .workload import Workload

__all__ = ["PG_DSN", "postgres_answers", "soak"]

PG_DSN = os.environ.get("MAIDEN_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")
SETTLE_S = 150.0
OUTBOX_S = 30.0  # six sweeps of every replica's outbox


async def postgres_answers() -> bool:
    try:
        conn = await asyncpg.connect(PG_DSN, timeout=3)
    except Exception:
        return False
    await conn.close()
    return True


def _through(dsn: str, port: int) -> str:
    parts = urlsplit(dsn)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


async def _drop_schema(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def soak(plan: Plan, work: Path, *, own_server: bool = False,
               small_disk: bool = False) -> Outcome:
    """One pass; Ctrl-C or a SIGTERM cancels it, once (a second signal does not cut the
    way out short): every process, the schema and the fakes are taken down.

    ``own_server``: PostgreSQL's pass on a server of its own (chaos/pgserver.py, dropped at
    the end), which ``pg_restart`` stops and starts; ``small_disk``: SQLite's file (or that
    server's data) on a small disk (chaos/disk.py: ``private_mounts()`` first), which
    ``disk_full`` fills."""
    this = asyncio.current_task()
    assert this is not None

    def stop() -> None:
        if not this.cancelling():
            this.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop)
    plan_file = work / f"plan-{plan.store}.json"
    plan.dump(plan_file)
    ledger = work / f"ledger-{plan.store}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CHAOS_MODEL_KEY": "sk-chaos",
           "CHAOS_LEDGER": str(ledger), "PYTHONUNBUFFERED": "1",
           **{f"CHAOS_TOKEN_{p.upper()}": token_of(p) for p in [*plan.people, OUTSIDER]}}
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(
            Model(plan.seed, work / f"model-{plan.store}.jsonl"))
        spec, proxy, dsn, outages = await _store(stack, plan, work, env, own_server=own_server,
                                                 small_disk=small_disk)
        fake: FakeSlack | None = None
        if any(op.route == "slack" for op in plan.ops):
            fake = await stack.enter_async_context(FakeSlack(wait=10.0))
            env.update(slack_env(fake))
        replicas = []
        extra = FILES_TOML  # what maiden refuses of the files people share (chaos/files.py)
        discord: FakeDiscord | None = None
        if any(op.route == "discord" for op in plan.ops):
            discord = await stack.enter_async_context(
                FakeDiscord(with_jobs_channel(discord_world(plan.people)), wait=10.0))
            env.update(discord_env(discord))
            extra += discord_toml(discord, plan.people)
        extra += delivering_toml(fake, discord) + hooks_toml()
        written_at = time.time()  # the reminders' times count from here (chaos/jobs.py)
        extra += jobs_toml(plan.reminders, written_at, fake is not None)
        env["CHAOS_HOOK_SECRET"] = HOOK_SECRET
        for i in range(plan.replicas):
            home = work / plan.store / f"r{i}"
            slack = slack_toml(fake, plan.people, http=i in plan.slack_http) if fake else ""
            replica = Replica(i, home, env, work / f"{plan.store}-r{i}.log", functools.partial(
                write_home, home, spec, model.base_url, people=plan.people,
                concurrency=plan.concurrency, extra=schedules_toml() + slack + extra))
            replicas.append(replica)
            stack.push_async_callback(replica.close)
        history = History()
        faults = Faults(plan, replicas, model, proxy, history)
        faults.outages.update(outages)
        stack.push_async_callback(faults.stop)  # no restart after the replicas are closed
        if fake is not None:
            faults.platforms["slack"] = fake
        resumes = GatewayResume(discord, history) if discord is not None else None
        if discord is not None:
            faults.platforms["discord"] = discord
            faults.resumer = resumes
        await asyncio.gather(*(faults.start(r) for r in replicas))
        if not all(r.up for r in replicas):
            raise RuntimeError("the replicas did not start:\n" + "\n".join(faults.surprises))
        client = Client()
        stack.push_async_callback(client.aclose)
        history.begin()
        history.note("begin", f"{plan.store}, {plan.replicas} replica(s) up; seed {plan.seed}")
        holds = Holds(replicas, faults.kill_now)  # held downloads' downloaders killed
        people = DiscordPeople(discord, history, holds) if discord else None
        slack_people = SlackPeople(fake, history, replicas, plan.slack_http,
                                   holds) if fake else None
        actor = DiscordActor(discord, plan.discord_acts, history) if discord else None
        workload = Workload(plan, replicas, client, history, slack=slack_people,
                            discord=people, discord_acts=actor)
        stack.push_async_callback(workload.cancel_all)
        jobs = Schedules(plan, replicas, client, history)
        operators = Operators(plan, replicas, client, history, workload)
        stack.push_async_callback(operators.settle, 0.0)
        background = [asyncio.create_task(faults.watch()), asyncio.create_task(
            workload.janitor()), asyncio.create_task(jobs.watch())]
        stack.push_async_callback(_stop, background)
        await asyncio.gather(workload.run(), faults.run(), jobs.run(), operators.run())
        await asyncio.sleep(max(0.0, plan.seconds - history.now()))
        await faults.quiet()
        if people is not None:
            await people.hand_over(open_store(spec, work, dsn), replicas, faults)
        drained = await workload.drain(SETTLE_S)
        await operators.settle(SETTLE_S)
        await jobs.pause_all()  # no slot fires while the store is read
        idle = await _idle(client, workload, SETTLE_S, SETTLE_S + plan.seconds)
        sent = await outbox_sent(spec, work, dsn, OUTBOX_S)
        history.note("settled", f"messages drained: {drained}; no run active: {idle}; "
                     f"outbox sent: {sent}")
        await _stop(background)
        stopped = {s.run_id for s in slack_people.acts.stops if s.run_id} if slack_people \
            else set()
        stopped |= {s.run_id for s in actor.stops if s.run_id} if actor else set()
        stored = await _read(client, workload, await read_leases(
            spec, work, faults.last_death, dsn), stopped)
        stored.held = await read_held_long(spec, work, dsn)
        kept = await read_kept(spec, work, dsn)
        await operators.read(stored)
        if people is not None:
            people.accept(workload.sent, stored)
        found = check(workload.sent, stored, model)
        blobs = await read_blobs(spec, work, dsn)
        found += check_files(plan, workload.sent, stored, blobs, model.log, fake, discord)
        reader = workload.pick(0)
        assert reader is not None, "no replica up to download the files through"
        downloaded, downloads = await check_downloads(client.http, reader.url, workload.sent,
                                                      stored)
        found += downloaded
        for seen in slack_people.acts.commands if slack_people else []:
            jobs.follow(seen.command.text, seen.at, seen.done, seen.answer)
            operators.runs_now.follow(seen.command.text, seen.request, seen.answer)
        for dseen in actor.commands if actor else []:
            if dseen.click is not None and dseen.click.outcome != "not sent":
                answer = dseen.answers[0] if len(dseen.answers) == 1 else None
                # Answered at once (type 4): done by then; deferred (5): by its edit.
                done = dseen.click.answered_at if dseen.click.answered == 4 else None
                jobs.follow(dseen.command.text, dseen.click.at, done or dseen.done, answer)
                operators.runs_now.follow(dseen.command.text,
                                          f"discord:{dseen.click.interaction}", answer)
        found += jobs.check(workload.sent, stored, kept)
        found += check_jobs(jobs, plan.reminders, written_at, kept, stored, fake)
        found += operators.check(stored, kept) + check_delivered(kept, fake, discord)
        if fake is not None and slack_people is not None:
            found += check_slack(plan, workload.sent, stored, fake)
            votes = await _votes(client, workload) if plan.votes else []
            votes = [v for v in votes if not str(v["thread_id"]).startswith("discord:")]
            found += check_acts(slack_people.acts, workload.sent, stored, votes, history)
        if people is not None:
            found += check_discord(plan, workload.sent, stored, people)
            found += check_registered(people.fake)
        if actor is not None:
            votes = await _votes(client, workload) if plan.discord_acts.votes else []
            found += check_discord_acts(actor, workload.sent, stored, votes, history)
        outcome = Outcome(plan.store, [v for v in found if v.known is None],
                          [v for v in found if v.known is not None],
                          summary(plan, workload, faults, model, stored, history.now()))
        at = next(i for i, line in enumerate(outcome.lines) if "invariants" in line)
        outcome.lines[at:at] = [jobs.summary(kept), jobs_summary(plan.reminders, kept),
                                *operators.lines(kept),
                                delivered_summary(kept, fake, discord),
                                files_summary(workload.sent, blobs, fake, discord,
                                              holds.outcomes),
                                downloads]
        if people is not None:
            outcome.lines.insert(at, discord_summary(workload.sent, people, resumes))
        if actor is not None:
            outcome.lines.insert(at + 1, discord_acts_summary(actor))
        if fake is not None and slack_people is not None:
            outcome.lines[at:at] = slack_summary(workload.sent, fake, slack_people.acts,
                                                 slack_people.wire)
        if found:
            outcome.lines += violations(plan, found, history, work, plan_file)
            if discord is not None:  # what Discord was asked and answered, for the trace
                _keep_calls(discord, work / f"discord-calls-{plan.store}.jsonl")
        # What was done when, all of it (a violation prints only what was around it).
        (work / f"history-{plan.store}.txt").write_text("\n".join(
            f"{t:8.2f}s  {kind:<14} {text}" for t, kind, text in history.events) + "\n")
        return outcome


def _keep_calls(fake: FakeDiscord, path: Path) -> None:
    """Every REST request the fake Discord received, in order, one JSON line each."""
    with path.open("w") as out:
        for call in fake.calls():
            out.write(json.dumps(dataclasses.asdict(call), default=str) + "\n")


async def _store(stack: AsyncExitStack, plan: Plan, work: Path, env: dict[str, str], *,
                 own_server: bool, small_disk: bool
                 ) -> tuple[StoreSpec, Proxy | None, str, dict[str, Outage]]:
    """The pass's store, taken down with ``stack``: on PostgreSQL a fresh schema behind the
    soak's proxy (``CHAOS_PG_DSN`` in ``env``), on a server of its own if it can have one;
    on SQLite one file, on a small disk if it can have one. With the DSN to read it with
    (not through the proxy) and the outages it allows."""
    outages: dict[str, Outage] = {}
    if plan.store != "postgres":
        folder = work / "sqlite" / "data"
        if small_disk:  # a few dozen MB: what a pass writes, and room to spare
            disk = await stack.enter_async_context(
                SmallDisk(folder, 64 + int(plan.seconds / 10)))
            outages["disk_full"] = DiskFull(disk)
        return StoreSpec("sqlite", path=str(folder / "maiden.db")), None, PG_DSN, outages
    dsn = PG_DSN
    if own_server:
        data = None
        if small_disk:  # the server's data on a small disk: a cluster, its WAL, and room
            disk = await stack.enter_async_context(
                SmallDisk(work / "postgres-server", 256 + int(plan.seconds / 5)))
            shutil.chown(disk.folder, "postgres", "postgres")
            data, outages["disk_full"] = disk.folder / "data", DiskFull(disk)
        try:
            server = await stack.enter_async_context(OwnServer(data))
        except RuntimeError as exc:
            print(f"chaos: postgres pass on the shared server, without pg_restart: a server "
                  f"of its own could not be made ({exc})", flush=True)
        else:
            dsn, outages["pg_restart"] = server.dsn, ServerRestart(server)
            if server.stale:
                print(f"chaos: dropped the clusters of soaks killed before: "
                      f"{', '.join(server.stale)}", flush=True)
    target = urlsplit(dsn)
    proxy = await stack.enter_async_context(
        Proxy(target.hostname or "127.0.0.1", target.port or 5432))
    spec = StoreSpec("postgres", schema=f"chaos_{plan.seed}_{uuid4().hex[:8]}")
    env["CHAOS_PG_DSN"] = _through(dsn, proxy.port)
    stack.push_async_callback(_drop_schema, dsn, spec.schema)
    return spec, proxy, dsn, outages


async def _idle(client: Client, workload: Workload, timeout_s: float, cap_s: float) -> bool:
    """Wait until no run is active or waiting for a person: while the runs still active keep
    changing (a backlog draining: one replica running one loop at a time may be far behind
    the workload when its faults stop), up to ``cap_s`` in all; ``timeout_s`` with none
    changing is a run left stuck."""
    loop = asyncio.get_running_loop()
    start = changed = loop.time()
    seen: frozenset[str] | None = None
    while loop.time() - changed < timeout_s and loop.time() - start < cap_s:
        replica = workload.pick(0)
        if replica is not None:
            with contextlib.suppress(httpx.HTTPError):
                runs = await client.runs(replica.url, "ana", state=[*ACTIVE,
                                                                   "awaiting_approval"])
                active = frozenset(str(run["run_id"]) for run in runs)
                if not active:
                    return True
                if active != seen:
                    seen, changed = active, loop.time()
        await asyncio.sleep(1.0)
    return False


async def _votes(client: Client, workload: Workload) -> list[dict[str, Any]]:
    replica = workload.pick(0)
    assert replica is not None, "no replica up to read the votes through"
    return await client.feedback(replica.url, "ana")


async def _read(client: Client, workload: Workload, leases: list[dict[str, Any]],
                also: set[str]) -> Stored:
    replica = workload.pick(0)
    assert replica is not None, "no replica up to read the store through"
    runs = await client.runs(replica.url, "ana")
    threads = set(await client.threads(replica.url, "ana")) | set(workload.plan.threads)
    entries = {t: await client.thread(replica.url, "ana", t) for t in sorted(threads)}
    ledger = Stored.read_ledger(Path(replica.env["CHAOS_LEDGER"]))
    # Every state change of the runs a person decided on, stopped or that recovered (the
    # lists leave them out): what the invariants say about a run that timed out or recovered.
    details = {r["run_id"]: await client.run(replica.url, "ana", r["run_id"])
               for r in runs if r["decisions"] or r["recovery_attempts"] or r["run_id"] in also}
    live = {r.proc.pid for r in workload.replicas if r.up and r.proc is not None}
    return Stored(runs, entries, ledger, details, leases, live)
