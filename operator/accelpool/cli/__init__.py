"""`accelpool`: the command line. Each subcommand lives in `accelpool.cli.commands.<name>`.

This module only assembles the parser; commands do their own work and return an exit code. It
imports only the command it runs (`accelpool.cli.commands.SUMMARIES` names the others).
Other distributions add commands through the `accelpool.commands` entry point group (a
`register(subparsers)` function): `accelpool demo` comes with accelpool-demo. Without it,
`accelpool demo` says how to install it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from accelpool.cli.commands import SUMMARIES

PLUGIN_GROUP = "accelpool.commands"
DEMO_MISSING = (
    "accelpool demo: the demo is not installed. It is the accelpool-demo distribution: from a clone of the\n"
    "repository, `make demo` (or `pip install -e ./demo`); from an index, `pip install 'accelpool[demo]'`."
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, that command's arguments alone (none for ""), the others named with
    their summaries (what `accelpool --help` lists) without importing their modules."""
    parser = argparse.ArgumentParser(
        prog="accelpool",
        description="ComputePools: GPU and accelerator node pools on Kubernetes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in SUMMARIES.items():
        if only is None or only == name:
            importlib.import_module(f"accelpool.cli.commands.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary, add_help=False)
    if only is None or only not in SUMMARIES:
        plugins = _plugins()
        for plugin in plugins.values():
            plugin.load()(subparsers)
        if "demo" not in plugins:
            _register_missing_demo(subparsers)
    return parser


def _plugins() -> dict[str, EntryPoint]:
    """The commands other distributions add (`accelpool demo` from accelpool-demo)."""
    return {e.name: e for e in entry_points(group=PLUGIN_GROUP)}


def _register_missing_demo(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="run accelpool on a simulated GPU cluster (needs accelpool-demo)", add_help=False
    )
    parser.set_defaults(func=_demo_missing)


def _demo_missing(args: argparse.Namespace) -> int:
    print(DEMO_MISSING, file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    chosen = next((word for word in arguments if not word.startswith("-")), None)
    parser = build_parser(only=chosen or "")
    args, unknown = parser.parse_known_args(arguments)
    if unknown and args.func is not _demo_missing:  # the missing demo's arguments are not known here
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    code: int = args.func(args)
    return code
