"""The command-line reference: every command, subcommand and argument of the parser that
``maiden`` itself uses (``bot.cli.build_parser``), with its help text, default and
choices, and the exit statuses the commands return."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..cli import build_parser
from ..commands import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED, EXIT_USAGE

__all__ = ["Argument", "Command", "commands", "render"]

EXITS = (
    (EXIT_OK, "done: the command did what it says (a run answered)"),
    (EXIT_FAILED, "the run failed, or a fault stopped the command (one line on stderr says "
     "what); `maiden check`: a secret variable is unset, or a channel or MCP server refused"),
    (EXIT_USAGE, "a usage or configuration error, or a platform refused a token: one line "
     "names the key or the argument, and nothing was sent"),
    (EXIT_PAUSED, "`send`, `approve`, `resume`, `schedules run`: the run waits for an "
     "approval (or is queued behind one)"),
    (EXIT_INTERRUPTED, "Ctrl-C"),
)

GUIDES = {
    "run": "../guides/operating.md",
    "chat": "../get-started/install.md#talk-to-it",
    "send": "../get-started/install.md#talk-to-it",
    "approve": "../guides/approvals-and-rights.md",
    "cancel": "../guides/approvals-and-rights.md#cancellation",
    "usage": "../guides/budgets.md",
    "schedules": "../guides/schedules.md",
    "files": "../guides/files.md",
    "check": "../guides/operating.md#maiden-check",
    "migrate": "../guides/replicas.md#migrating-from-sqlite",
}
"""Where a command is explained at length."""


@dataclass(frozen=True, slots=True)
class Argument:
    """A positional argument or an option, as the parser defines it."""

    flags: tuple[str, ...]  # ("--log-format",) or ("-v", "--verbose"); () for a positional
    metavar: str
    help: str
    default: str
    choices: tuple[str, ...]
    required: bool
    repeatable: bool
    takes_value: bool

    @property
    def name(self) -> str:
        return ", ".join(self.flags) if self.flags else self.metavar


@dataclass(frozen=True, slots=True)
class Command:
    """``maiden schedules run``: its words, what it does, its arguments."""

    words: tuple[str, ...]
    help: str
    arguments: tuple[Argument, ...]

    @property
    def anchor(self) -> str:
        return "-".join(self.words) if self.words else "maiden"


def commands(parser: argparse.ArgumentParser | None = None) -> list[Command]:
    """The global options (``words == ()``), then every command and subcommand, in the
    parser's order."""
    found: list[Command] = []

    def walk(p: argparse.ArgumentParser, words: tuple[str, ...], text: str) -> None:
        found.append(Command(words, text, tuple(
            _argument(a, p) for a in p._actions if _shown(a))))
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help or "" for c in action._choices_actions}
                for name, child in action.choices.items():
                    walk(child, (*words, name), helps.get(name, ""))

    root = parser or build_parser()
    walk(root, (), root.description or "")
    return found


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The reference page, Markdown."""
    found = commands(parser)
    root, rest = found[0], found[1:]
    out = ["# Command line", "", f"`{_usage(root)}`", "",
           f"{root.help} Every command reads `agent.toml` from the current folder, or the "
           "file `--config` names; if that file is missing, every default applies "
           "([agent.toml](config.md)).", "", "## Global options {#maiden}", ""]
    out += _arguments(root)
    out += ["## Commands", "", "| command | what it does |", "|---|---|"]
    out += [f"| [`maiden {' '.join(c.words)}`](#{c.anchor}) | {_cell(c.help)} |" for c in rest]
    out.append("")
    for command in rest:
        level = "#" * (len(command.words) + 1)
        out += [f"{level} `maiden {' '.join(command.words)}` {{#{command.anchor}}}", "",
                f"`{_usage(command)}`", "", _sentence(command.help), ""]
        out += _arguments(command)
        if command.words[-1] in GUIDES and len(command.words) == 1:
            out += [f"More: [{command.words[0]}]({GUIDES[command.words[0]]}).", ""]
    out += ["## Exit status", "", "| status | meaning |", "|---|---|"]
    out += [f"| {code} | {_cell(text)} |" for code, text in EXITS]
    out.append("")
    return "\n".join(out)


def _shown(action: argparse.Action) -> bool:
    return not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)


def _argument(action: argparse.Action, parser: argparse.ArgumentParser) -> Argument:
    takes_value = action.nargs != 0
    braces = "{" + ",".join(map(str, action.choices or ())) + "}"
    metavar = action.metavar if isinstance(action.metavar, str) else \
        braces if action.choices is not None and len(braces) <= 30 else action.dest.upper()
    text = (action.help or "") % {**vars(action), "prog": parser.prog} if action.help else ""
    shown_default = takes_value and action.default not in (None, [], "", argparse.SUPPRESS)
    if shown_default:  # the default has a column of its own
        text = text.replace(f" (default: {action.default})", "")
    return Argument(
        flags=tuple(action.option_strings), metavar=metavar, help=text,
        default=str(action.default) if shown_default else "",
        choices=tuple(map(str, action.choices or ())),
        required=action.required or not action.option_strings,
        repeatable=isinstance(action, argparse._AppendAction), takes_value=takes_value)


def _usage(command: Command) -> str:
    parts = ["maiden", *command.words]
    for arg in command.arguments:
        if not arg.flags:
            parts.append(arg.metavar)
            continue
        flag = arg.flags[-1] if arg.flags[-1].startswith("--") else arg.flags[0]
        text = f"{flag} {arg.metavar}" if arg.takes_value else flag
        parts.append(text if arg.required else f"[{text}]" + ("..." if arg.repeatable else ""))
    if not command.words:
        parts.append("COMMAND")
    return " ".join(parts)


def _arguments(command: Command) -> list[str]:
    if not command.arguments:
        return []
    out = ["| argument | what it is | default |", "|---|---|---|"]
    for arg in command.arguments:
        name = f"`{arg.name} {arg.metavar}`" if arg.flags and arg.takes_value \
            else f"`{arg.name}`"
        text = arg.help
        if arg.choices and not arg.metavar.startswith("{"):
            text += f"; one of {', '.join(f'`{c}`' for c in arg.choices)}"
        if arg.repeatable:
            text += "; repeatable" if "repeatable" not in text else ""
        if arg.flags and arg.required:
            text += "; required"
        default = f"`{arg.default}`" if arg.default else ""
        out.append(f"| {name} | {_cell(text)} | {default} |")
    out.append("")
    return out


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
