"""What a `maiden` process says while it starts, through real subprocesses: a tools module
that ends the process as it is imported, Ctrl-C while the imports run, and the banner's
account of recovery."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.processes.test_cli import _serve, _stop, _with_tools, maiden
from tests.processes.test_cli_faults import ENV, interrupt_when, one_line


def use_tools(home: Path, module: str, source: str) -> None:
    (home / f"{module}.py").write_text(textwrap.dedent(source))
    text = (home / "agent.toml").read_text().replace("modules = []", f'modules = ["{module}"]')
    (home / "agent.toml").write_text(text)


# -- a tools module that ends the process ------------------------------------------------------


@pytest.mark.parametrize(("ending", "how"), [
    ("os._exit(0)", "it exited with status 0"),
    ("os.kill(os.getpid(), signal.SIGKILL)", "it was killed by SIGKILL"),
])
def test_check_names_a_tools_module_that_ends_the_process(
    home: Path, ending: str, how: str
) -> None:
    use_tools(home, "quits", f'''
        import os, signal
        from runtime import tool

        @tool()
        def fine() -> str:
            """Never offered: the module ends the process below."""
            return "fine"

        {ending}
    ''')
    result = maiden(home, "check")
    assert result.returncode == 2, result.stdout + result.stderr
    error = one_line(result)
    assert error.splitlines()[-1] == (
        f"agent.toml: tools.modules: importing 'quits' ended the process ({how} "
        "before the import finished): a tools module must not exit or crash while it is "
        "imported")
    assert "fine (read_only)" not in result.stdout


def test_check_still_imports_a_good_tools_module(home: Path) -> None:
    use_tools(home, "good", '''
        from runtime import tool

        @tool()
        def fine() -> str:
            """Fine."""
            return "fine"
    ''')
    result = maiden(home, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fine (read_only)" in result.stdout


# -- Ctrl-C while starting ---------------------------------------------------------------------


BLOCKING_TOOLS = '''
    import time
    from pathlib import Path
    from runtime import tool

    Path("importing").write_text("yes")
    time.sleep(60)  # a slow import: Ctrl-C comes while it runs


    @tool()
    def fine() -> str:
        """Fine."""
        return "fine"
'''


@pytest.mark.parametrize("command", [["send", "t", "hi"], ["check"], ["threads"]])
def test_ctrl_c_while_a_tools_module_is_imported_says_one_line(
    home: Path, command: list[str]
) -> None:
    use_tools(home, "blocking", BLOCKING_TOOLS)
    proc = subprocess.Popen([sys.executable, "-m", "bot", *command], cwd=home, env=ENV,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _, err = interrupt_when(proc, home / "importing")
    assert proc.returncode == 130
    assert err == "maiden: interrupted (Ctrl-C)\n"


# Starts `maiden` as `python -m bot` does, or as the installed script does (its entry
# point), with an audit hook that stops the process in the import of the command line
# itself (a slow disk, a cold cache) until Ctrl-C comes.
PAUSED_IN_IMPORT = """
import runpy, sys, time
from importlib.metadata import entry_points
from pathlib import Path

def pause(event, args):
    if event == "import" and args[0] == "bot.cli":
        Path("importing").write_text("yes")
        time.sleep(60)

sys.addaudithook(pause)
how, sys.argv = sys.argv[1], ["maiden", *sys.argv[2:]]
if how == "-m":
    runpy.run_module("bot", run_name="__main__", alter_sys=True)
else:
    (script,) = entry_points(group="console_scripts", name="maiden")
    sys.exit(script.load()())
"""


@pytest.mark.parametrize("how", ["-m", "script"])
def test_ctrl_c_while_the_command_line_is_imported_says_one_line(home: Path, how: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_IN_IMPORT, how, "threads"], cwd=home,
                            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = interrupt_when(proc, home / "importing")
    assert (proc.returncode, out) == (130, "")
    assert err == "maiden: interrupted (Ctrl-C)\n"


# -- the banner's account of recovery ----------------------------------------------------------


def test_the_banner_counts_recovery_the_same_way_from_start_to_end(home: Path) -> None:
    """A run queued behind one that waits for a person is found unfinished, but this
    process cannot take it up: the last line counts it too, and says why."""
    _with_tools(home)
    paused = maiden(home, "send", "ops", '/tool restart {"service": "db"}')
    queued = maiden(home, "send", "ops", "and then?")
    assert (paused.returncode, queued.returncode) == (3, 3), paused.stderr + queued.stderr
    ids = {line.split()[1]: line.split()[0]
           for line in maiden(home, "runs").stdout.splitlines() if "thread=" in line}
    server, banner = _serve(home)
    _stop(server)
    lines = banner.splitlines()
    at = lines.index("  recovering  1 unfinished run(s)...")
    waiting = f"waiting behind run {ids['awaiting_approval']}, which awaits approval"
    assert lines[at + 1] == f"    1/1 {ids['queued']}: queued ({waiting})"
    end = lines.index("  recovered   0 of 1 unfinished run(s); 1 not taken up here:")
    assert lines[end + 1] == f"    {ids['queued']} on 'ops': queued ({waiting})"
    assert lines[end + 2].startswith("Ready.")
