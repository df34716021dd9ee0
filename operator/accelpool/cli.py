"""`accelpool`: the command line. Each subcommand lives in `accelpool.commands.<name>`.

This module only assembles the parser; commands do their own work and return an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from accelpool.commands import catalog, crd, dashboards, demo, plan, run, validate

COMMANDS = (validate, catalog, crd, plan, run, demo, dashboards)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accelpool",
        description="ComputePools: GPU and accelerator node pools on Kubernetes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
