"""Workload 12: files. N mentions in Slack, each sharing a 1 MB image chosen among K
distinct ones (N=100, K=10 in the full run), through the real Slack channel (Socket Mode)
against the tests' fake Slack, which serves the images at ``url_private_download``; the
model is the echo model, which is told of each image. Measured: the bytes stored against
the bytes shared (each image once: about K MB, not N), the time from the event to its
ack (the files are fetched after it, as the run's first step: p99 < 100 ms), and the time
from the event to the posted reply, beside the same N mentions without files.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from channels.slack import SlackConfig, SlackSecrets
from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import EchoProvider, Records, Runtime, SQLiteStore
from runtime.stores.sqlite import Synchronous
from tests.fakes.slack import BOT_USER, FakeSlack

from .table import Row, verdict
from .thread import remove_db

__all__ = ["FilesResult", "files_rows", "run_files"]

C = "C0BENCHFILE1"


@dataclass
class Pass:
    ack_ms: list[float] = field(default_factory=list)
    reply_ms: list[float] = field(default_factory=list)


@dataclass
class FilesResult:
    messages: int
    distinct: int
    image_bytes: int
    shared_bytes: int
    stored_bytes: int
    blobs: int
    with_files: Pass
    without: Pass

    @staticmethod
    def percentile(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def noise_png(size: int, seed: int) -> bytes:
    """A PNG of about ``size`` bytes (random pixels do not compress)."""
    side = int((size / 3) ** 0.5)
    pixels = (seed.to_bytes(4, "big") + os.urandom(side * side * 3))[:side * side * 3]
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(out, format="PNG", compress_level=1)
    return out.getvalue()


async def _pass(fake: FakeSlack, messages: int, images: list[bytes]) -> Pass:
    measured = Pass()
    for i in range(messages):
        text = f"<@{BOT_USER}> what is in picture {i}?"
        if images:
            event = fake.share_file(C, "U1", text, [(f"shot-{i}.png", images[i % len(images)],
                                                     "image/png")])
        else:
            event = fake.user_event(C, "U1", text, mention=True)
        posted = len(fake.messages(C))
        start = time.perf_counter()
        await fake.acked(await fake.socket_event(event), timeout=60)
        measured.ack_ms.append((time.perf_counter() - start) * 1000)
        await fake.wait_messages(C, posted + 1, timeout=60)  # the reply, in its thread
        measured.reply_ms.append((time.perf_counter() - start) * 1000)
    return measured


async def run_files(workdir: Path, messages: int, distinct: int, image_bytes: int,
                    synchronous: Synchronous) -> FilesResult:
    images = [noise_png(image_bytes, n) for n in range(distinct)]
    passes: dict[bool, Pass] = {}
    stored = blobs = 0
    for with_files in (False, True):
        path = workdir / f"files-{with_files}.db"
        remove_db(path)
        async with FakeSlack() as fake:
            config = SlackConfig(api_url=fake.api_url, file_hosts=[fake.base_url], open=True,
                                 stream="off")
            secrets = SlackSecrets(bot_token=fake.bot_token, app_token=fake.app_token,
                                   signing_secret=None)
            async with SQLiteStore(path, synchronous=synchronous) as store:
                slack = SlackOutbound(config, secrets, Records(store), pace_s=0)
                async with Runtime(store, EchoProvider(), deliverers={"slack": slack.deliverer},
                                   fetchers={"slack": slack.fetcher}) as rt, \
                        SlackChannel(rt, slack):
                    await fake.wait_connected()
                    passes[with_files] = await _pass(fake, messages,
                                                     images if with_files else [])
                    await rt.idle()
                if with_files:
                    found = await store.blobs()
                    stored, blobs = sum(b.size for b in found), len(found)
    return FilesResult(messages=messages, distinct=distinct, image_bytes=len(images[0]),
                       shared_bytes=sum(len(images[i % distinct]) for i in range(messages)),
                       stored_bytes=stored, blobs=blobs, with_files=passes[True],
                       without=passes[False])


ACK_MS = 100.0
STORED = 1.1
"""Bytes stored against the distinct images' bytes: each stored once (and a little)."""


def files_rows(r: FilesResult) -> list[Row]:
    """Workload 12: what is stored of shared files, and what they cost a message."""
    name = f"12 files, {r.messages} messages x 1 image of {r.distinct}"
    distinct_mb = r.image_bytes * r.distinct / 1e6
    stored_mb, shared_mb = r.stored_bytes / 1e6, r.shared_bytes / 1e6
    rows = [
        Row(name, "MB stored, against the distinct images' MB", f"{stored_mb:.1f}",
            f"{distinct_mb:.1f}", f"{stored_mb / distinct_mb:.2f}x",
            f"<= {STORED:g}x", verdict(stored_mb / distinct_mb, at_most=STORED)),
        Row(name, f"  MB shared ({r.messages} x {r.image_bytes / 1e6:.2f} MB), blobs",
            f"{shared_mb:.1f}", f"{r.blobs}"),
    ]
    for p in (50, 99):
        m = r.percentile(r.with_files.ack_ms, p)
        b = r.percentile(r.without.ack_ms, p)
        rows.append(Row(name, f"ms from event to ack, p{p} (without files: baseline)",
                        f"{m:.1f}", f"{b:.1f}", f"{m / b:.2f}x" if b else "",
                        f"< {ACK_MS:g} ms" if p == 99 else "",
                        verdict(m, at_most=ACK_MS) if p == 99 else ""))
    m = sum(r.with_files.reply_ms) / len(r.with_files.reply_ms)
    b = sum(r.without.reply_ms) / len(r.without.reply_ms)
    rows.append(Row(name, "ms from event to the posted reply, mean", f"{m:.1f}", f"{b:.1f}",
                    f"{m / b:.2f}x" if b else ""))
    return rows
