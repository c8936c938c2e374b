"""ToolRegistry (runtime/tools/registry.py): tools by name, one name one tool, the
services they need, and tools added from a user's module with errors a user can act on."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import ConfigError, ToolDefinitionError, ToolRegistry, tool


@tool
def clock() -> str:
    """The time."""
    return "x"


@tool(name="remember", needs=["notes"])
def remember(text: str) -> str:
    """Keep a note."""
    return text


@pytest.fixture
def fresh_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Module names a test imports, forgotten after it (and ``sys.path`` as it was)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    names: list[str] = []
    yield names
    for name in names:
        sys.modules.pop(name, None)


def test_tools_by_name() -> None:
    registry = ToolRegistry([clock, remember])
    assert len(registry) == 2 and list(registry) == [clock, remember]
    assert registry.get("clock") is clock and "remember" in registry
    assert registry.get("nope") is None and "nope" not in registry
    assert registry.specs() == [clock.spec, remember.spec]
    assert len(ToolRegistry()) == 0


def test_two_tools_of_one_name_are_refused() -> None:
    @tool(name="clock")
    def other() -> str:
        return "y"

    with pytest.raises(ToolDefinitionError, match="two tools are named 'clock'"):
        ToolRegistry([clock, other])
    registry = ToolRegistry([clock])
    registry.add(clock)  # the same tool again changes nothing
    assert list(registry) == [clock]


def test_replace_puts_a_tool_in_place_of_its_namesake() -> None:
    registry = ToolRegistry([clock, remember])
    asked = clock.with_approval(True)
    registry.replace(asked)
    assert registry.get("clock") is asked and len(registry) == 2


def test_every_service_a_tool_needs_must_be_provided() -> None:
    registry = ToolRegistry([clock, remember])
    registry.check_needs(["notes"])
    registry.check_needs(["notes", "send"])
    with pytest.raises(ToolDefinitionError,
                       match="tool 'remember' needs notes, which this runtime is not given"):
        registry.check_needs(["send"])
    ToolRegistry([clock]).check_needs([])


def test_every_tool_of_a_module_is_added(tmp_path: Path, fresh_imports: list[str]) -> None:
    fresh_imports.append("maiden_registry_tools")
    (tmp_path / "maiden_registry_tools.py").write_text(textwrap.dedent('''
        from runtime import tool

        @tool
        def ping() -> str:
            """Pong."""
            return "pong"

        @tool(name="pong")
        def other() -> str:
            """Ping."""
            return "ping"

        not_a_tool = 3
    '''))
    registry = ToolRegistry([clock])
    found = registry.add_module("maiden_registry_tools", tmp_path)
    assert [t.name for t in found] == ["ping", "pong"]
    assert [t.name for t in registry] == ["clock", "ping", "pong"]


@pytest.mark.parametrize(("source", "why"), [
    ("x = 1\n", "module 'maiden_registry_bad' defines no @tool"),
    ("raise RuntimeError('no token')\n",
     "cannot import 'maiden_registry_bad': RuntimeError: no token"),
    ("import sys\nsys.exit(3)\n",
     "cannot import 'maiden_registry_bad': it called sys.exit(3)"),
    ("def broken(:\n", "cannot import 'maiden_registry_bad': SyntaxError"),
    (None, "cannot import 'maiden_registry_bad': ModuleNotFoundError"),
])
def test_a_module_that_gives_no_tools_is_a_config_error(
        tmp_path: Path, fresh_imports: list[str], source: str | None, why: str) -> None:
    fresh_imports.append("maiden_registry_bad")
    if source is not None:
        (tmp_path / "maiden_registry_bad.py").write_text(source)
    with pytest.raises(ConfigError) as info:
        ToolRegistry().add_module("maiden_registry_bad", tmp_path)
    (key, problem), = info.value.problems
    assert key == "tools.modules" and problem.startswith(why)


def test_a_module_whose_tool_has_a_taken_name_is_refused(
        tmp_path: Path, fresh_imports: list[str]) -> None:
    fresh_imports.append("maiden_registry_clash")
    (tmp_path / "maiden_registry_clash.py").write_text(
        "from runtime import tool\n\n@tool\ndef clock() -> str:\n    return 'mine'\n")
    with pytest.raises(ToolDefinitionError, match="two tools are named 'clock'"):
        ToolRegistry([clock]).add_module("maiden_registry_clash", tmp_path)
