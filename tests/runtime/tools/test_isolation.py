"""Whom shell commands run as, and the line `maiden check` and the banner print about it:
``choose_user`` and ``isolation_line`` as tables (the real processes are in
``tests/processes/test_shell_isolation.py``)."""

from __future__ import annotations

import pytest

from runtime import ConfigError
from runtime.tools.isolation import RunAs, Sandbox, choose_user, isolation_line

NOBODY = RunAs("nobody", 65534, 65534, "/nonexistent")
USERS = {"nobody": NOBODY, "65534": NOBODY, "root": RunAs("root", 0, 0, "/root"),
         "wheel-ish": RunAs("wheel-ish", 1001, 0, "/home/w")}


@pytest.mark.parametrize(("euid", "run_as", "expected"), [
    (1000, "nobody", None),           # not root: maiden's own user, run_as unused
    (1000, "no-such-user", None),
    (1000, "root", None),
    (0, "nobody", NOBODY),
    (0, "65534", NOBODY),
])
def test_the_user_commands_run_as(euid: int, run_as: str, expected: RunAs | None) -> None:
    assert choose_user(euid, run_as, USERS.get) == expected


@pytest.mark.parametrize(("run_as", "reason"), [
    ("no-such-user", "no user 'no-such-user' on this machine"),
    ("root", "'root' is root (uid 0)"),
    ("wheel-ish", "'wheel-ish' is root (group 0)"),
])
def test_as_root_an_unusable_run_as_is_a_config_error(run_as: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        choose_user(0, run_as, USERS.get)
    [(key, said)] = caught.value.problems
    assert key == "tools.shell.run_as" and said.startswith(reason), said


NO_NS = "/usr/bin/bwrap cannot create namespaces here: No permissions"
BWRAP = "bubblewrap sandbox (own PID namespace and /proc)"
REST = "own session, scrubbed environment"
READ = "maiden's environment is not readable to it"


@pytest.mark.parametrize(("sandbox", "no_bwrap", "user", "linux", "line"), [
    ("auto", None, NOBODY, True, f"{BWRAP}, as nobody (uid 65534); {REST}"),
    ("bwrap", None, None, True, f"{BWRAP}, as maiden's own user; {REST}"),
    ("auto", NO_NS, NOBODY, True, f"no sandbox ({NO_NS}), as nobody (uid 65534): {READ}; {REST}"),
    ("off", None, NOBODY, True,
     f'no sandbox ([tools.shell] sandbox = "off"), as nobody (uid 65534): {READ}; {REST}'),
    ("off", None, None, True, f'no sandbox ([tools.shell] sandbox = "off"), as maiden\'s own '
     f"user under a non-dumpable maiden: {READ}; {REST}"),
    ("auto", "not Linux", None, False, f"no sandbox (not Linux), as maiden's own user; {REST}"),
    ("bwrap", NO_NS, NOBODY, True,
     f'NONE: [tools.shell] sandbox = "bwrap" but {NO_NS}; the shell tool is refused'),
])
def test_the_isolation_line(sandbox: Sandbox, no_bwrap: str | None, user: RunAs | None,
                            linux: bool, line: str) -> None:
    assert isolation_line(sandbox, no_bwrap, user, linux=linux) == line
