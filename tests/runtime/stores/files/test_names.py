"""The file names threads get in the files store (runtime/stores/files/names.py), pure: plain,
one per thread id (on a case-insensitive disk too), never ``.`` or ``..``, hashed when long."""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from runtime.errors import InvalidThreadId
from runtime.stores.files import thread_file_name


@pytest.mark.parametrize(("thread_id", "name"), [
    ("", "t-"),
    ("a", "t-a"),
    ("A", "t-_41"),
    ("abc-123", "t-abc-123"),
    ("a/b", "t-a_2Fb"),
    ("a_b", "t-a_5Fb"),
    ("a%2Fb", "t-a_252_46b"),
    ("../x", "t-_2E_2E_2Fx"),
    (".", "t-_2E"),
    ("..", "t-_2E_2E"),
    ("a b", "t-a_20b"),
    ("a\u2028b", "t-a_E2_80_A8b"),
    ("C:\\x", "t-_43_3A_5Cx"),
    ("日", "t-_E6_97_A5"),
    ("slack:T1:C2:1700.5", "t-slack_3A_541_3A_432_3A1700_2E5"),
    ("x" * 178, "t-" + "x" * 178),
    ("x" * 179, "h-" + hashlib.sha256(b"x" * 179).hexdigest()),
    ("/" * 60, "h-" + hashlib.sha256(b"/" * 60).hexdigest()),
    ("x" * 10_000, "h-" + hashlib.sha256(b"x" * 10_000).hexdigest()),
])
def test_thread_file_name(thread_id: str, name: str) -> None:
    assert thread_file_name(thread_id) == name


def test_thread_file_name_rejects_lone_surrogates() -> None:
    with pytest.raises(InvalidThreadId):
        thread_file_name("\ud800")


def test_thread_file_name_is_injective_and_plain() -> None:
    rng = random.Random(20240601)
    alphabet = ["a", "b", "A", "B", "_", "-", "%", "2", "F", ".", "/", "\\", " ", "\u2028",
                "é", "日", "🎉", "_2F", "_5F", "t-", "h-"]
    ids = {""}
    for _ in range(5000):
        ids.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
    for _ in range(200):  # long enough to be hashed
        ids.add("".join(rng.choice(alphabet) for _ in range(rng.randint(60, 200))))
    names = {thread_file_name(thread_id) for thread_id in ids}
    assert len(names) == len(ids)
    assert len({name.lower() for name in names}) == len(ids)  # case-insensitive disks too
    plain = re.compile(r"(t-[a-z0-9_A-F-]*|h-[0-9a-f]{64})")
    for name in names:
        assert plain.fullmatch(name), name
        assert len(name) <= 180
        assert name not in {".", ".."}
