"""`accelpool validate -f FILE`: check ComputePools offline, as the API server and operator would.

Exit 0 when every object is valid; 1 with one line per problem (object, field path, bad value,
what would be valid); 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from accelpool import validation
from accelpool.textio import add_filename_argument, read_sources


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "validate",
        help="validate ComputePool YAML files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_filename_argument(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def _sources(names: list[str]) -> list[tuple[str, str]]:
    sources: list[tuple[str, str]] = []
    for name in names:
        if name == "-":
            sources.append(("<stdin>", sys.stdin.read()))
            continue
        path = Path(name)
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
        sources += [(str(f), f.read_text()) for f in files]
    return sources


def run(args: argparse.Namespace) -> int:
    try:
        sources = [source for name in args.filename for source in read_sources(name)]
    except OSError as error:
        print(f"error: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
        return 2
    results = [(source, verdict) for source, text in sources for verdict in validation.validate_stream(text)]
    if args.output == "json":
        report = [
            {
                "file": source,
                "object": verdict.label,
                "valid": verdict.valid,
                "problems": [{"path": p.path, "value": p.value, "message": p.message} for p in verdict.problems],
            }
            for source, verdict in results
        ]
        print(json.dumps(report, indent=2, default=str))
    else:
        for source, verdict in results:
            if verdict.valid:
                print(f"{source}: {verdict.label}: valid")
            for problem in verdict.problems:
                scalar = problem.value is not None and not isinstance(problem.value, dict | list)
                shown = f" (value: {json.dumps(problem.value, default=str)})" if scalar else ""
                print(f"{source}: {verdict.label}: {problem.path}: {problem.message}{shown}")
        invalid = sum(1 for _, v in results if not v.valid)
        print(f"{len(results) - invalid} valid, {invalid} invalid", file=sys.stderr)
    return 0 if results and all(v.valid for _, v in results) else 1
