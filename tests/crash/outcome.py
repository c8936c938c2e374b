"""What the crash tests read from a driver process: its summary and the tool's traces."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.model.runs import idempotency_key
from tests.crash import launch
from tests.crash.driver import CALLS_FILE, EFFECTS_FILE, SCRIPT, read_lines
from tests.postgres import PG_DSN

__all__ = ["CALL_IDS", "SCHEMAS", "STORES", "Traces", "normalise", "run_driver", "schema_name",
           "schema_of", "store_args", "tail"]

STORES = ("sqlite", "files", "postgres")

SCHEMAS: set[str] = set()
"""The PostgreSQL schemas this (pytest) process's drills have used, until the crash tests'
``dropped_schemas`` fixture drops them at the end of the test."""


def schema_name(root: Path) -> str:
    """The PostgreSQL schema of the drill in ``root``: the same for every process of it,
    another for every other folder (``tmp_path`` differs per test, and per pytest run)."""
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return f"maiden_crash_{digest}"


def schema_of(root: Path) -> str:
    """``schema_name(root)``, recorded in ``SCHEMAS`` to be dropped at the test's end."""
    schema = schema_name(root)
    SCHEMAS.add(schema)
    return schema


def store_args(root: Path, store: str) -> list[str]:
    """The driver's arguments naming the store of the drill in ``root``: a SQLite file or a
    files store's folder there, or a schema of its own on the test server."""
    if store == "postgres":
        return ["--db", schema_of(root), "--store", store, "--dsn", PG_DSN]
    db = root / ("files" if store == "files" else "maiden.db")
    return ["--db", str(db), "--store", store]


def run_driver(root: Path, store: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One driver process on the store of ``root`` (``STORES``; see ``store_args``), with
    the read-only tool, and ``args``; waited for."""
    return launch.run(*store_args(root, store), "--effect", "read_only",
                      "--workdir", str(root), *args)


CALL_IDS = [f"call_0_{i}" for i in range(len(SCRIPT[0]["tool_calls"]))]


def finished(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The summary a driver that ended well printed (its stderr's end if it did not)."""
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def tail(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def normalise(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every string that ``names`` knows replaced by what it stands for (run
    ids, keys: they differ between a crashed run and the uninterrupted one)."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [normalise(v, names) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v, names) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Traces:
    """One driver process's summary (one run) and the side-effect traces so far."""

    summary: dict[str, Any]
    invocations: Counter[str]
    """How many times the tool ran, per idempotency key."""
    effects: Counter[str]
    """How many times the tool's effect was applied, per idempotency key."""

    @staticmethod
    def read(summary: dict[str, Any], traces: Path) -> dict[str, Any]:
        """The fields of a ``Traces`` from a summary and the traces folder."""
        return {"summary": summary,
                "invocations": Counter(line["key"] for line in read_lines(traces / CALLS_FILE)),
                "effects": Counter(line["key"] for line in read_lines(traces / EFFECTS_FILE))}

    @property
    def run(self) -> dict[str, Any]:
        (run,) = self.summary["runs"]
        return run  # type: ignore[no-any-return]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return self.summary["threads"][self.run["thread_id"]]  # type: ignore[no-any-return]

    @property
    def pending_call(self) -> str:
        pending = self.run["pending_approval"]
        assert pending is not None, f"run is {self.run['state']}, not awaiting approval"
        return str(pending["tool_call_id"])

    def keys(self) -> list[str]:
        """The idempotency keys of the run's calls, in order."""
        return [idempotency_key(self.run["id"], call_id) for call_id in CALL_IDS]
