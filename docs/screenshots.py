"""Regenerate the console's screenshots in the docs (docs/console-*.png) from a real
`maiden run`, so they show what maiden serves today.

    .venv/bin/python docs/screenshots.py [--out DIR]    # default: docs/

It makes a temporary home (the repository's agent.toml with the offline echo model, SQLite
in the home, port 8765 if free, two tools of its own: ``deploy``, which asks for approval,
and ``slow``, which waits until cancelled; prices, so there is spend; an every-minute
schedule), starts `maiden run` there, brings about each page's state through the HTTP API as any
client would, and has headless Chromium (Debian's, /usr/bin/chromium or $MAIDEN_CHROMIUM,
driven by Playwright as in tests/browser/) take each page at 1280x800, the whole page.
Then it stops `maiden run` with SIGTERM, checks that it exited 0, and removes the home.

It takes 15 to 80 seconds: the schedule's slot is a real one, so it waits for the next
minute. Everything happens now (maiden's clock is the real one): the spend charts have
today's bar only, the schedule one slot, and the times and run ids differ on every run.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("MAIDEN_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",  # as the tests
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_S = 30.0
"""How long a step waits for maiden (a banner, a run's end, a page's content)."""

TOOLS = '''\
"""The screenshots' tools: one that asks a person first, one that waits to be cancelled."""
import asyncio

from runtime import tool


@tool(effect="non_idempotent", requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


@tool(effect="read_only", timeout_s=60)
async def slow(q: str) -> str:
    """Look something up, slowly (until the run is cancelled)."""
    await asyncio.Event().wait()
    return q
'''

EXTRA = '''
[provider.prices]
input = 3.0
output = 15.0

[http]
port = {port}

[[schedules]]
name = "heartbeat"
cron = "* * * * *"
prompt = "the heartbeat check"
'''


def port() -> int:
    """The docs' port (8765, the default) if it is free, so that the Now page shows the
    URL the guides name and stays the same from one run to the next; else any free one."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8765))
        except OSError:
            return 0
    return 8765


def make_home(home: Path) -> None:
    """agent.toml (the repository's, with our tools, prices, a port, a schedule) and the tools."""
    toml = (ROOT / "agent.toml").read_text()
    if "modules = []" not in toml:
        raise SystemExit("screenshots: agent.toml has no `modules = []` to add the tools to")
    toml = toml.replace("modules = []", 'modules = ["shots_tools"]', 1)
    (home / "agent.toml").write_text(toml + EXTRA.format(port=port()))
    (home / "shots_tools.py").write_text(TOOLS)


def start(home: Path, log: IO[str]) -> tuple[subprocess.Popen[str], str]:
    """`maiden run` in ``home``, importing this checkout's code (its log lines to ``log``),
    and the URL it serves."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=log, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:  # the banner, then whatever else it prints (never blocked on)
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C stops." in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(WAIT_S)
    found = re.search(r"over HTTP at (http://\S+), ", "".join(lines))
    if found is None:
        proc.kill()
        proc.wait()
        raise SystemExit("screenshots: `maiden run` gave no URL:\n" + "".join(lines)
                         + (home / "maiden.log").read_text())
    return proc, found.group(1)


def stop(proc: subprocess.Popen[str], home: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(WAIT_S)
    if code != 0:
        raise SystemExit(f"screenshots: `maiden run` exited {code} on SIGTERM:\n"
                         + (home / "maiden.log").read_text())
    print("stopped `maiden run` (SIGTERM, exit 0)")


class Api:
    """The HTTP API of the running maiden, as a client without a token (loopback)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def send(self, thread: str, text: str, *, wait: bool = True) -> dict[str, Any]:
        got = self.http.post(f"/v1/threads/{quote(thread, safe='')}/messages",
                             json={"text": text, "wait": wait})
        got.raise_for_status()
        answer: dict[str, Any] = got.json()
        return answer

    def post(self, path: str, body: dict[str, Any] | None = None) -> None:
        self.http.post(path, json=body).raise_for_status()

    def until(self, path: str, done: Callable[[Any], bool], what: str) -> None:
        """GET ``path`` until its answer is ``done``."""
        deadline = time.monotonic() + WAIT_S * 3  # a schedule's slot may be a minute off
        while not done(self.http.get(path).raise_for_status().json()):
            if time.monotonic() > deadline:
                raise SystemExit(f"screenshots: {what} never came ({path})")
            time.sleep(0.2)


def shoot(url: str, api: Api, out: Path) -> None:
    from playwright.sync_api import Page, expect, sync_playwright

    expect.set_options(timeout=WAIT_S * 1000)
    errors: list[str] = []

    def visit(page: Page, path: str) -> None:
        response = page.goto(url + path)
        if response is None or response.status != 200:
            raise SystemExit(f"screenshots: {path} answered "
                             f"{response and response.status}")

    def save(page: Page, name: str) -> None:
        if errors:
            raise SystemExit(f"screenshots: the {name} page logged errors: {errors}")
        path = out / f"console-{name}.png"
        page.screenshot(path=path, full_page=True)
        print(f"wrote {path}: {page.url[len(url):]}")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        # A thread: a tool call, a question, and a message sent from the page.
        api.send("ops", '/tool clock {"tz": "UTC"}')
        api.send("ops", "what did the clock say?")
        visit(page, "/threads/ops")
        page.locator("#send textarea[name=text]").fill("hello from the browser")
        page.locator("#send").get_by_role("button", name="Send").click()
        expect(page.locator("#replies .entry.assistant.ended")).to_contain_text(
            "echo: hello from the browser")
        expect(page.locator("#replies .entry.assistant.live")).to_have_count(0)
        save(page, "thread")

        # Two calls waiting for a person; the one in ops is approved afterwards.
        api.send("releases", '/tool deploy {"service": "billing"}')
        run = api.send("ops", '/tool deploy {"service": "api"}')
        visit(page, "/approvals")
        expect(page.locator("article.approval")).to_have_count(2)
        save(page, "approvals")
        call = run["approval"]
        api.post(f"/v1/runs/{run['run_id']}/approvals/{call['tool_call_id']}",
                 {"approve": True, "arguments_hash": call["arguments_hash"], "wait": True})

        # Now: a run in its tool, one behind it (one run at a time), one approval waiting.
        busy = api.send("research", '/tool slow {"q": "x"}', wait=False)["run_id"]
        behind = api.send("ops", "and then?", wait=False)["run_id"]
        visit(page, "/")
        expect(page.locator(f'#in-progress tr[data-run="{busy}"]')).to_contain_text("slow")
        expect(page.locator(f'#now a[href="/runs/{behind}"]')).to_be_visible()
        expect(page.locator("#now")).to_contain_text("1 approval waiting")
        save(page, "now")
        api.post(f"/v1/runs/{busy}/cancel")
        api.until(f"/v1/runs/{behind}", lambda r: r["state"] == "completed",
                  "the queued run's end")

        # Spend: a few threads' runs (all today: maiden's clock is the real one).
        for i in range(12):
            api.send(f"team-{i % 3}", f"the report, part {i}")
        visit(page, "/spend?days=7")
        expect(page.locator("figure#cost-chart svg.chart rect.bar")).to_have_count(7)
        save(page, "spend")

        # A schedule's slots: the first minute's slot, run and completed.
        api.until("/v1/schedules/heartbeat/history",
                  lambda h: any(s["run"] and s["run"]["state"] == "completed"
                                for s in h["slots"]), "the schedule's first slot")
        visit(page, "/schedules/heartbeat")
        expect(page.locator("#slots tbody tr").first).to_contain_text("completed")
        save(page, "schedule")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs",
                        help="where the console-*.png go (default: docs/)")
    out: Path = parser.parse_args().out
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        sys.exit("screenshots: no playwright package: pip install -e '.[dev]' "
                 "(or pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        sys.exit(f"screenshots: no Chromium at {CHROMIUM}: apt-get install chromium "
                 "(or set MAIDEN_CHROMIUM)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="maiden-shots-") as tmp, \
            (Path(tmp) / "maiden.log").open("w") as log:
        home = Path(tmp)
        make_home(home)
        proc, url = start(home, log)
        try:
            with httpx.Client(base_url=url, timeout=WAIT_S) as http:
                shoot(url, Api(http), out)
            stop(proc, home)
        finally:
            if proc.poll() is None:  # it failed on the way: no process is left behind
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
