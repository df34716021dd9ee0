"""The `accelpool` command's start-up: wall time of `--help`, `validate -f one.yaml` and `catalog`, each run
as a user runs it (a new process of the installed console script), the median of several runs.

Target (issue 30): `accelpool --help` and `accelpool validate -f one.yaml` within 0.3 s on this
machine: a command imports only what it uses (`accelpool.cli`). The note names the interpreter's own
start-up, the floor under every command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from report import print_results

ROOT = Path(__file__).resolve().parent.parent
ACCELPOOL = Path(sys.executable).parent / "accelpool"
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "accelpool --help": (["--help"], 0.3),
    "accelpool validate -f examples/h100-training.yaml": (["validate", "-f", "examples/h100-training.yaml"], 0.3),
    "accelpool catalog": (["catalog"], None),
}


def wall_seconds(argv: list[str], runs: int) -> list[float]:
    """Wall time of `argv` as a new process, `runs` times (one warm-up run first: the page cache)."""
    subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    floor = statistics.median(wall_seconds([sys.executable, "-c", "pass"], args.runs))
    results: list[dict[str, Any]] = []
    for what, (argv, target) in COMMANDS.items():
        times = wall_seconds([str(ACCELPOOL), *argv], args.runs)
        median = statistics.median(times)
        results.append(
            {
                "what": what,
                "value": round(median, 3),
                "unit": "s",
                "target": f"≤ {target} s" if target else "-",
                "met": median <= target if target else None,
                "note": f"median of {args.runs}, min {min(times):.3f} s; python -c pass: {floor:.3f} s",
            }
        )
    print_results("The accelpool command's start-up", results, as_json=args.json)


if __name__ == "__main__":
    main()
