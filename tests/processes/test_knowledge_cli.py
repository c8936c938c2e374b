"""`maiden knowledge index` and `status`, `maiden check`'s lines, the ``search_knowledge``
tool through `maiden send` (the echo model shows the citations it got back), and `maiden
run` indexing in the background, its console's Knowledge page showing the pass: real
processes on a real store and folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.processes.test_cli import ROOT, maiden

KNOWLEDGE = """
[[knowledge]]
name = "runbooks"
path = "docs/runbooks"
exclude = ["drafts/**"]

[[knowledge]]
name = "later"
path = "not/mounted/yet"
"""


def _home(home: Path) -> Path:
    text = (home / "agent.toml").read_text().replace(
        'builtins = ["clock"]', 'builtins = ["clock", "search_knowledge"]')
    (home / "agent.toml").write_text(text + KNOWLEDGE)
    docs = home / "docs" / "runbooks"
    (docs / "drafts").mkdir(parents=True)
    (docs / "deploy.md").write_text("# Deploys\n\n## Rollback\n\nRun `make rollback`, "
                                    "then tell #ops.\n")
    (docs / "oncall.txt").write_text("Page the person on call.")
    (docs / "drafts" / "new.md").write_text("# Rollback v2\n\nNot yet.")
    return docs


def test_index_then_status_then_the_tool_cites_what_it_found(home: Path) -> None:
    docs = _home(home)
    checked = maiden(home, "check")
    assert f"knowledge runbooks: {docs} found; for every agent, everywhere" in checked.stdout
    assert "knowledge later: " in checked.stdout and "NOT FOUND" in checked.stdout

    indexed = maiden(home, "knowledge", "index")
    assert indexed.returncode == 0, indexed.stderr
    lines = indexed.stdout.splitlines()
    assert "runbooks: 2 of 2 files, 2 changed, 0 removed" in lines
    assert any(line.startswith(f"runbooks  {docs}: 2 file(s), 2 passage(s), last indexed ")
               for line in lines), lines
    assert any(line.startswith("later  ") and "(NOT FOUND)" in line and
               "folder not found" in line for line in lines), lines

    again = maiden(home, "knowledge", "index")
    assert "runbooks: 2 of 2 files, 0 changed, 0 removed" in again.stdout

    status = maiden(home, "knowledge", "status")
    assert status.returncode == 0, status.stderr
    assert f"runbooks  {docs}: 2 file(s), 2 passage(s), last indexed " in status.stdout
    assert "later  " in status.stdout and "never indexed" in status.stdout

    sent = maiden(home, "send", "t", '/tool search_knowledge {"query": "rollback"}')
    assert sent.returncode == 0, sent.stderr
    prefix = "search_knowledge returned "
    assert sent.stdout.startswith(prefix), sent.stdout
    found = json.loads(sent.stdout.removeprefix(prefix))
    assert found["searched"] == ["runbooks", "later"]
    assert [(p["cite"], p["text"]) for p in found["passages"]] == [
        ("runbooks/deploy.md, Deploys > Rollback", "Run `make rollback`, then tell #ops.")]


def test_run_indexes_in_the_background_and_stops_cleanly(home: Path) -> None:
    _home(home)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    seen = []
    try:
        for line in proc.stderr:  # the pass's last line for each source, in the log
            seen.append(line)
            if "later: folder not found" in line:  # the second source, after the first
                break
        else:
            raise AssertionError("no indexing pass:\n" + "".join(seen))
        assert any("runbooks: 2 of 2 files, 2 changed, 0 removed" in line for line in seen)
        banner = []
        for line in proc.stdout:  # up to Ready, printed before the pass began
            banner.append(line)
            if line.startswith("Ready."):
                break
        url = next(line for line in banner if line.startswith("  http ")).split()[1]
        page = httpx.get(url + "/knowledge", timeout=20).text  # loopback: no token asked
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        out = "".join(banner) + rest
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "  knowledge   runbooks, later: indexed in the background now, then every 60 min" \
        in out
    status = maiden(home, "knowledge", "status")
    assert "runbooks  " in status.stdout and ": 2 file(s), 2 passage(s)" in status.stdout
    runbooks = " ".join(page.split('<tr data-source="runbooks">')[1].split("</tr>")[0].split())
    assert "<td>2</td> <td>2</td>" in runbooks and "2 changed, 0 removed" in runbooks
    later = page.split('<tr data-source="later">')[1].split("</tr>")[0]
    assert "folder not found" in later
