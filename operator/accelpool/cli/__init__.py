"""`accelpool`: the command line. Each subcommand lives in `accelpool.cli.commands.<name>`.

This module only assembles the parser; commands do their own work and return an exit code.
Other distributions add commands through the `accelpool.commands` entry point group (a
`register(subparsers)` function): `accelpool demo` comes with accelpool-demo. Without it,
`accelpool demo` says how to install it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from accelpool.cli import commands

COMMANDS = (
    commands.validate,
    commands.catalog,
    commands.crd,
    commands.plan,
    commands.check,
    commands.run,
    commands.dashboards,
    commands.recommend,
)
"""Bound through `commands`: `accelpool.cli.dashboards` and `.recommend` are the packages behind two of them."""
PLUGIN_GROUP = "accelpool.commands"
DEMO_MISSING = (
    "accelpool demo: the demo is not installed. It is the accelpool-demo distribution: from a clone of the\n"
    "repository, `make demo` (or `pip install -e ./demo`); from an index, `pip install 'accelpool[demo]'`."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelpool",
        description="ComputePools: GPU and accelerator node pools on Kubernetes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    plugins = {e.name: e for e in entry_points(group=PLUGIN_GROUP)}
    for plugin in plugins.values():
        plugin.load()(subparsers)
    if "demo" not in plugins:
        _register_missing_demo(subparsers)
    return parser


def _register_missing_demo(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="run accelpool on a simulated GPU cluster (needs accelpool-demo)", add_help=False
    )
    parser.set_defaults(func=_demo_missing)


def _demo_missing(args: argparse.Namespace) -> int:
    print(DEMO_MISSING, file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.func is not _demo_missing:  # the missing demo's arguments are not known here
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    code: int = args.func(args)
    return code
