"""A store that goes away or is damaged under maiden, and thread ids with control characters.

Through real `maiden` processes, where the faults were seen: the database deleted,
replaced or overwritten in place while `maiden run` serves (the next message is refused,
/healthz says so, one log line), random bytes written into a thread's pages (that thread's run fails
``corrupt_store`` in one line, the others go on, `maiden show` shows what it can read), and
ids with a NUL or a newline (refused by every entry point, with the rule named).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest

from runtime import InvalidThreadId, Run, StoreGone
from runtime.stores import Checkpoint, FilesStore, SQLiteStore
from tests.http_helpers import echo_runtime, thread_url
from tests.processes.test_cli import ROOT, maiden
from tests.processes.test_cli_faults import one_line

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@contextmanager
def serving(home: Path) -> Iterator[tuple[httpx.Client, Path]]:
    """`maiden run` in ``home`` up to its Ready line: a client for its HTTP API, and the
    file its log (stderr) goes to. Stopped with SIGTERM after."""
    log = home / "run.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=home, env=ENV,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    try:
        banner = ""
        for line in proc.stdout:
            banner += line
            if line.startswith("Ready."):
                break
        found = re.search(r"http://127\.0\.0\.1:\d+", banner)
        assert found is not None, banner + log.read_text()
        with httpx.Client(base_url=found.group(), timeout=30) as client:
            yield client, log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


# -- the database deleted or replaced under `maiden run` ----------------------------------


def _delete(db: Path) -> None:
    for path in db.parent.glob(db.name + "*"):
        path.unlink()


def _replace(db: Path) -> None:
    """What restoring a backup does: another file (the same bytes, here) at the path."""
    copy = db.with_name("backup.db")
    shutil.copyfile(db, copy)
    os.replace(copy, db)


@pytest.mark.parametrize(("change", "said"), [(_delete, "was deleted"),
                                              (_replace, "was replaced by another file")])
def test_a_database_that_goes_away_is_noticed_by_maiden_run(home: Path, change: object,
                                                            said: str) -> None:
    assert callable(change)
    with serving(home) as (client, log):
        kept = client.post(thread_url("t", "/messages"), json={"text": "kept"})
        assert kept.status_code == 200, kept.text
        assert client.get("/healthz").status_code == 200
        change(home / "data" / "maiden.db")
        # Noticed with no request at all: the heartbeat looks too, and the log says so.
        _wait_for_line(log, said)
        for text in ("lost", "lost again"):  # never a 200 for a message nobody will read
            refused = client.post(thread_url("t", "/messages"), json={"text": text})
            assert refused.status_code == 503, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["code"] == "store_gone"
            assert said in refused.json()["detail"] and "restart" in refused.json()["detail"]
        health = client.get("/healthz")
        assert health.status_code == 503
        assert said in health.json()["store"]
    lines = [line for line in log.read_text().splitlines() if said in line]
    assert len(lines) == 1 and "ERROR maiden.store" in lines[0], log.read_text()
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(("source", "said"), [
    ("backup", "it holds a copy of this store from before this process opened it"),
    ("other", "it holds another store"),
])
def test_a_database_overwritten_in_place_is_noticed_by_maiden_run(home: Path, source: str,
                                                                  said: str) -> None:
    """``cp backup.db data/maiden.db`` while serving: the same inode, other bytes."""
    db = home / "data" / "maiden.db"
    sent = maiden(home, "send", "t", "before the backup")
    assert sent.returncode == 0, sent.stderr
    backup = home / "backup.db"
    if source == "backup":
        shutil.copyfile(db, backup)
    else:  # another maiden's database
        other = home / "other"
        shutil.copytree(home, other, ignore=shutil.ignore_patterns("data", "other"))
        assert maiden(other, "send", "t", "elsewhere").returncode == 0
        shutil.copyfile(other / "data" / "maiden.db", backup)
    with serving(home) as (client, log):
        for text in ("one", "two", "three"):
            kept = client.post(thread_url(text, "/messages"), json={"text": text})
            assert kept.status_code == 200, kept.text
        inode = db.stat().st_ino
        subprocess.run(["cp", str(backup), str(db)], check=True)
        assert db.stat().st_ino == inode
        refused = client.post(thread_url("t", "/messages"), json={"text": "lost"})
        assert refused.status_code == 503, refused.text
        assert refused.json()["code"] == "store_gone"
        detail = refused.json()["detail"]
        assert "was overwritten" in detail and said in detail and "restart" in detail
        health = client.get("/healthz")
        assert health.status_code == 503 and said in health.json()["store"]
    lines = [line for line in log.read_text().splitlines() if "was overwritten" in line]
    assert len(lines) == 1 and "ERROR maiden.store" in lines[0], log.read_text()
    assert "Traceback" not in log.read_text()


HOLD_TOOLS = """
import pathlib
import time

from runtime import tool


@tool(effect="idempotent_write")
def hold() -> str:
    \"\"\"Say so in a file named holding, then wait for one named release.\"\"\"
    pathlib.Path("holding").touch()
    while not pathlib.Path("release").exists():
        time.sleep(0.02)
    return "released"
"""


def test_a_run_in_progress_when_the_database_goes_writes_no_more(home: Path) -> None:
    (home / "hold_tools.py").write_text(HOLD_TOOLS)
    config = home / "agent.toml"
    config.write_text(config.read_text().replace("modules = []", 'modules = ["hold_tools"]'))
    with serving(home) as (client, log), ThreadPoolExecutor(1) as pool:
        # A caller waiting for the reply: it must learn why none comes, not get a run that
        # looks merely queued.
        waiting = pool.submit(client.post, thread_url("t", "/messages"),
                              json={"text": "/tool hold {}", "wait": True})
        _wait_for_file(home / "holding")
        _delete(home / "data" / "maiden.db")
        _wait_for_line(log, "was deleted")
        (home / "release").touch()
        # The tool's result is not written to the lost file: the run stops there.
        answer = waiting.result(timeout=30)
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "store_gone"
        assert "was deleted" in answer.json()["detail"]
        assert client.get("/healthz").status_code == 503
    # One error line; the run's own log line says it stopped, and why.
    errors = [line for line in log.read_text().splitlines()
              if "was deleted" in line and "ERROR" in line]
    assert len(errors) == 1, log.read_text()
    assert "WARNING" not in log.read_text() and "Traceback" not in log.read_text()


def _wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _wait_for_line(log: Path, text: str) -> None:
    """Until a line of ``log`` holds ``text`` (the file is read again as it grows)."""
    deadline = time.monotonic() + 30
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{log.read_text()}"
        time.sleep(0.05)


async def test_sqlite_refuses_writes_once_its_file_is_replaced(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store:
        first = await store.create_run(_run("a", "r1"))
        assert store.gone() is None
        _replace(db)
        with pytest.raises(StoreGone, match="was replaced"):
            await store.create_run(_run("a", "r2"))
        # Checkpoints only look at what was found (no stat each): refused from now on.
        with pytest.raises(StoreGone):
            await store.commit(Checkpoint("a", None, run=first.model_copy(
                update={"version": first.version + 1})))
        assert "was replaced" in (store.gone() or "")


async def test_a_files_store_whose_folder_is_deleted_refuses_messages(tmp_path: Path) -> None:
    root = tmp_path / "files"
    async with FilesStore(root) as store:
        await store.create_run(_run("a", "r1"))
        shutil.rmtree(root)
        with pytest.raises(StoreGone, match=r"store folder .* was deleted"):
            await store.create_run(_run("a", "r2"))
        assert not root.exists()  # not made again, empty, as if the history never was


def _run(thread_id: str, run_id: str) -> Run:
    return Run(id=run_id, thread_id=thread_id, text="hi", created_at=1.0, updated_at=1.0)


# -- damaged pages ------------------------------------------------------------------------


def _damage(db: Path, marker: bytes, whole_page: bool) -> None:
    """Random bytes over ``marker`` where it is in a row of the ``entries`` table: a few
    bytes of the row, or the whole page that holds them."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        try:
            pages = {n for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'entries'")}
        except sqlite3.OperationalError:
            pytest.skip("this SQLite has no dbstat table: cannot find a table's pages")
    data = db.read_bytes()
    offsets = [m.start() for m in re.finditer(re.escape(marker), data)
               if m.start() // size + 1 in pages]
    assert offsets, "the marker is in no page of the entries table"
    start, length = (offsets[0] // size * size, size) if whole_page else (offsets[0] - 32, 64)
    with db.open("r+b") as f:
        f.seek(start)
        f.write(random.Random(24).randbytes(length))


@pytest.mark.parametrize("whole_page", [False, True], ids=["row-bytes", "whole-page"])
def test_damaged_pages_fail_that_threads_run_and_no_other(home: Path, whole_page: bool
                                                          ) -> None:
    filler = "x" * 6000  # a row over several pages: its middle has a page of its own
    for thread in ("t1", "t2", "t3"):
        sent = maiden(home, "send", thread, f"{filler}MARK-{thread}{filler}")
        assert sent.returncode == 0, sent.stderr
    _damage(home / "data" / "maiden.db", b"MARK-t2", whole_page)

    failed = maiden(home, "send", "t2", "are you there?")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    error = one_line(failed)
    assert error.count("\n") == 1 and "failed: corrupt_store" in error, error

    for thread in ("t1", "t3"):
        other = maiden(home, "send", thread, "still here")
        if whole_page and other.returncode == 1:
            # A whole page of garbage can take its neighbours with it: SQLite walks through
            # a row on that page to find theirs. They end the same way, never stuck.
            assert "failed: corrupt_store" in one_line(other), other.stderr
            continue
        assert other.returncode == 0 and other.stdout == "echo: still here\n", other.stderr

    shown = maiden(home, "show", "t2")
    assert shown.returncode == 1
    assert one_line(shown).count("\n") == 1
    assert "unreadable" in shown.stdout
    assert "corrupt_store" in shown.stdout  # its runs, and why the last one failed
    runs = maiden(home, "runs", "--thread", "t2")
    assert runs.returncode == 0 and "corrupt_store" in runs.stdout
    assert "queued" not in runs.stdout  # nothing left waiting forever


# -- thread ids ---------------------------------------------------------------------------


def test_a_thread_id_with_control_characters_is_refused_everywhere(home: Path) -> None:
    with serving(home) as (client, _):
        for raw in ("a%00b", "a%0Ab", "%1B%5B31m"):
            posted = client.post(f"/v1/threads/{raw}/messages", json={"text": "hi"})
            assert posted.status_code == 422, posted.text
            assert posted.json()["code"] == "invalid_thread_id"
            assert "control characters" in posted.json()["detail"]
            read = client.get(f"/v1/threads/{raw}")
            assert read.status_code == 422 and read.json()["code"] == "invalid_thread_id"
        assert client.get("/v1/threads").json()["total"] == 0
    for command in (["send", "a\nb", "hi"], ["show", "a\x1bb"], ["runs", "--thread", "a\tb"]):
        result = maiden(home, *command)
        assert result.returncode == 2, result.stderr
        error = one_line(result)
        assert error.count("\n") == 1 and "control characters" in error, error


async def test_submit_refuses_a_thread_id_with_a_nul(tmp_path: Path) -> None:
    async with echo_runtime(tmp_path / "m.db") as rt:
        with pytest.raises(InvalidThreadId, match=r"control characters .*'\\x00' at position 1"):
            await rt.submit("a\x00b", "hi")
        assert await rt.records.threads() == []


def test_a_message_taken_before_the_store_goes_says_it_was_taken(home: Path) -> None:
    """`maiden send` has no key: the same words sent again are a second message. So when
    the store fails after its run was taken, it says the run was taken and not to send it
    again (the chaos soak's person typed such a message again: two runs)."""
    (home / "hold_tools.py").write_text(HOLD_TOOLS)
    config = home / "agent.toml"
    config.write_text(config.read_text().replace("modules = []", 'modules = ["hold_tools"]'))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-m", "bot", "send", "t", "/tool hold {}"],
                          cwd=home, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as sending:
        assert sending.stderr is not None
        lines: list[str] = []
        reading = threading.Thread(target=lambda: lines.extend(sending.stderr or ()),
                                   daemon=True)
        reading.start()
        _wait_for_file(home / "holding")
        _delete(home / "data" / "maiden.db")
        deadline = time.monotonic() + 30
        while not any("was deleted" in line for line in lines):  # noticed, then let go
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        (home / "release").touch()
        sending.wait(timeout=60)
        reading.join(timeout=10)
    err = "".join(lines)
    assert sending.returncode == 1, err
    assert re.search(r"maiden: run \w{32} was taken, then the store failed \(", err), err
    assert "do not send it again" in err
