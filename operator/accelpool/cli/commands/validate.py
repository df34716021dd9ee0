"""`accelpool validate -f FILE`: check ComputePools offline, as the API server and operator would.

`-f DIR` reads the directory's *.yaml files; `-R` the directories below it too (kubectl's `-R`).

The files are read as kubectl reads them (`accelpool_core.textio`): `nodes: 1:30` is the string
"1:30", `dedicated: y` is true, `1e1` is 10. Exit 0 when every object is valid; 1 with one line
per problem (object, field path, bad value, what would be valid); 2 when a file cannot be read
as Kubernetes objects: it is missing, too large, not YAML, a YAML bomb, holds a value kubectl
would refuse to send (`.inf`, a null key), or a document is not shaped like an object (a
`metadata` that is not a mapping, a label value that is not a string, ...). Each of those is one line on standard
error, `error: FILE:LINE:COL: ...` or `error: FILE:LINE: document N (Kind/name): field: ...`;
the objects that could be read are still checked and reported.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from accelpool.cli.commands import SUMMARIES
from accelpool.model import shapes
from accelpool_api import validation
from accelpool_core.textio import add_filename_argument, brief, one_line, read_objects


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "validate",
        help=SUMMARIES["validate"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_filename_argument(parser)
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    errors: list[str] = []
    results: list[tuple[str, validation.Verdict]] = []
    for name in args.filename:
        found = read_objects([name], recursive=args.recursive)
        errors += found.errors
        for obj in found.objects:
            shape = shapes.object_problems(obj.body)
            errors += [obj.problem(p.path, p.message, p.value) for p in shape]
            if not shape:
                results.append((obj.source, validation.validate_object(obj.body)))
    if args.output == "json":
        report = [
            {
                "file": source,
                "object": verdict.label,
                "valid": verdict.valid,
                "stage": verdict.stage,
                "rejection": one_line(verdict.rejection, MESSAGE_CHARS * 4) if not verdict.valid else None,
                "problems": [
                    {
                        "path": p.path,
                        "value": _json_value(p.value),
                        "message": one_line(p.message, MESSAGE_CHARS),
                        "error": one_line(str(p), MESSAGE_CHARS),
                    }
                    for p in verdict.problems
                ],
            }
            for source, verdict in results
        ]
        print(json.dumps(report, indent=2, default=str))
    else:
        for source, verdict in results:
            if verdict.valid:
                print(one_line(f"{source}: {verdict.label}: valid"))
            for problem in verdict.problems:
                hint = f" ({problem.hint})" if problem.hint else ""
                message = one_line(f"{problem}{hint}", MESSAGE_CHARS)
                print(one_line(f"{source}: {verdict.label}: {message}", MESSAGE_CHARS * 2))
        invalid = sum(1 for _, v in results if not v.valid)
        unreadable = f", {len(errors)} input errors" if errors else ""
        print(f"{len(results) - invalid} valid, {invalid} invalid{unreadable}", file=sys.stderr)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        return 2
    return 0 if results and all(v.valid for _, v in results) else 1


MESSAGE_CHARS = 2000
"""A message longer than this (one that quotes a huge value) is cut."""


def _json_value(value: Any) -> Any:
    """The offending value as it was when small; its first characters (`brief`) when it is large."""
    shown = brief(value, MESSAGE_CHARS)
    return value if not shown.endswith("…") else shown
