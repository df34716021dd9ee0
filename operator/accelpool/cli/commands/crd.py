"""`accelpool crd`: print the ComputePool CustomResourceDefinition generated from the models."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from accelpool.cli.commands import SUMMARIES
from accelpool_api import crd


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("crd", help=SUMMARIES["crd"], description=__doc__)
    parser.set_defaults(func=run)


def run(_: argparse.Namespace) -> int:
    sys.stdout.write(crd.render_yaml())
    return 0
