"""docs/reference/cli.md: the `accelpool` and `accelpool-agent` commands, their subcommands and flags, read from
their argparse parsers.

The parsers are built as the console scripts build them (`accelpool.cli.build_parser`, with the commands
other distributions add, such as `accelpool demo`; `accelpool_agent.cli.build_parser`), in an
environment without the variables some defaults come from (`$NODE_NAME`, `$ACCELPOOL_AGENT_BACKEND`,
...), so the page is the same on every machine.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from hack.refdocs.markdown import anchor, banner, code, table, text, value

WIDTH = 100
"""Columns of the usage lines (argparse wraps them to the terminal's width otherwise)."""
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "HOME": "/home/user", "LANG": "C.UTF-8"}
"""All the environment the parsers are built in."""


@dataclass(frozen=True)
class Command:
    path: str
    """`accelpool validate`, `accelpool demo inject`."""
    summary: str
    """The one line the parent's help gives it."""
    parser: argparse.ArgumentParser


def commands(parser: argparse.ArgumentParser, summary: str = "") -> Iterator[Command]:
    """The command and its subcommands, depth first, in the order the parser lists them."""
    yield Command(parser.prog, summary, parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias maps to the same parser
                    seen.add(id(sub))
                    yield from commands(sub, helps.get(name, ""))


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _default(action: argparse.Action) -> str:
    default = action.default
    if default in (None, argparse.SUPPRESS, [], ()) or isinstance(action, argparse._StoreConstAction):
        return ""
    if isinstance(default, bool) and action.nargs == 0:
        return ""
    if isinstance(default, (tuple, list)):
        return code(",".join(str(d) for d in default))
    return value(default) if isinstance(default, (str, bool, int, float)) else code(str(default))


def _help(action: argparse.Action) -> str:
    """The action's help with argparse's `%(name)s` fields filled in, as `--help` prints it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    fields = {**vars(action), "prog": "", "default": action.default}
    if action.choices is not None:
        fields["choices"] = ", ".join(str(c) for c in action.choices)
    try:
        return action.help % fields
    except (KeyError, TypeError, ValueError):
        return action.help


def arguments(parser: argparse.ArgumentParser) -> list[list[str]]:
    """One row per argument: its flags (or name), the value it takes, its default, choices and help."""
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            flags = ", ".join(code(o) for o in action.option_strings)
            shown = action.metavar or (
                "{" + ",".join(str(c) for c in action.choices) + "}" if action.choices else action.dest.upper()
            )
            takes = "" if action.nargs == 0 else code(str(shown))
        else:
            flags = code(str(action.metavar or action.dest))
            takes = "positional"
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        if action.choices is not None and (action.metavar or not action.option_strings):
            notes.append("one of " + ", ".join(code(str(c)) for c in action.choices))
        help_text = text(_help(action))
        rows.append([flags, takes, _default(action), "; ".join([*notes, help_text] if help_text else notes)])
    return rows


def render_command(command: Command, level: int) -> str:
    parser = command.parser
    parts = [f"{'#' * level} {command.path}\n"]
    if command.summary:
        parts.append(text(command.summary[:1].upper() + command.summary[1:]) + ".\n")
    parts.append(f"```text\n{usage(parser)}\n```\n")
    description = (parser.description or "").strip("\n")
    if description and description != command.summary:
        parts.append(f"```text\n{description}\n```\n")
    rows = arguments(parser)
    if rows:
        parts.append(table(["Argument", "Value", "Default", "Description"], rows))
    subcommands = [c for c in commands(parser) if c.parser is not parser]
    direct = [c for c in subcommands if c.path.count(" ") == command.path.count(" ") + 1]
    if direct:
        parts.append("Subcommands: " + ", ".join(f"[`{c.path}`](#{anchor(c.path)})" for c in direct) + ".\n")
    return "\n".join(parts)


def render(parsers: Sequence[argparse.ArgumentParser]) -> str:
    parts = [
        "# Command-line reference\n",
        banner(
            "the argparse parsers of `accelpool` (operator/accelpool/cli/) and `accelpool-agent` "
            "(device-agent/accelpool_agent/cli.py)"
        ),
        "Every subcommand and flag of the two commands, as `--help` gives them. `accelpool` comes with the "
        "operator's distribution (`accelpool demo` with accelpool-demo); `accelpool-agent` is the device "
        "agent's command, the one its DaemonSet runs. Both exit 2 on a bad argument, naming it and what "
        "would be valid.\n",
    ]
    for parser in parsers:
        for command in commands(parser):
            parts.append(render_command(command, 2 if " " not in command.path else 3))
    return "\n".join(parts)


@contextmanager
def fixed_environment() -> Iterator[None]:
    """`ENVIRONMENT` as os.environ for the block: defaults read from the environment come out the same."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(ENVIRONMENT)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def parsers() -> list[argparse.ArgumentParser]:
    from accelpool.cli import build_parser
    from accelpool_agent.cli import build_parser as build_agent_parser

    with fixed_environment():
        return [build_parser(), build_agent_parser()]


def page() -> str:
    return render(parsers())
