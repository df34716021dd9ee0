"""How the operator's convergence grows with the cluster: time to Ready, writes, CPU and memory at 1k-10k nodes.

At each size (nodes, and a pool per 20 nodes, as 10,000 x 500) `operator_convergence.measure` runs
on `bench_cluster`'s emulated cluster: seconds from applying the pools to every pool Ready, the
operator's API writes against the minimum, its CPU seconds and its peak RSS (VmHWM: the kopf pool
index, the node informer's views, the caches). Written: one row per size and measure, the ratios of
the largest size to the smallest, and `benchmarks/growth.png` (time and peak RSS over nodes, with
proportional growth from the smallest size dashed).

    .venv/bin/python benchmarks/operator_growth.py [--nodes 1000 2000 5000 10000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from operator_convergence import measure
from png_chart import BLUE, ORANGE, Panel, chart
from report import print_results

HERE = Path(__file__).resolve().parent
NODES_PER_POOL = 20
RSS_TARGET_MB = 400.0
"""Issue 16: the operator's RSS at 10,000 nodes."""


def results(sizes: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    found = []
    for nodes, report in sizes:
        size = f"{nodes:,} nodes x {nodes // NODES_PER_POOL} pools"
        ratio = report["total"] / report["minimum"]
        large = nodes >= 10_000
        found += [
            {
                "what": f"{size}: all pools Ready",
                "value": round(report["seconds"], 2),
                "unit": "s",
                "target": "<= 60 s (at 10,000 x 500)" if large else "-",
                "met": report["seconds"] <= 60 if large else None,
                "note": f"{size}: {report['members']} members, {report['passes']:.0f} passes, operator CPU "
                f"{report['cpu_seconds']:.1f} s, writes {report['total']} vs minimum {report['minimum']}",
            },
            {
                "what": f"{size}: API writes until Ready / minimum necessary",
                "value": round(ratio, 3),
                "unit": "x",
                "target": "<= 1.02 x (at 10,000 x 500)" if large else "-",
                "met": ratio <= 1.02 if large else None,
                "note": "",
            },
            {
                "what": f"{size}: operator peak RSS",
                "value": round(report["peak_rss_mb"], 1),
                "unit": "MB",
                "target": f"<= {RSS_TARGET_MB:g} MB (at 10,000)" if large else "-",
                "met": report["peak_rss_mb"] <= RSS_TARGET_MB if large else None,
                "note": "",
            },
        ]
    (small, first), (big, last) = sizes[0], sizes[-1]
    if big > small:
        growth = big / small
        found += [
            {
                "what": f"time to Ready, {big:,} / {small:,} nodes",
                "value": round(last["seconds"] / first["seconds"], 2),
                "unit": "x",
                "target": f"near-linear (the nodes grew {growth:g}x)",
                "met": last["seconds"] / first["seconds"] <= 1.5 * growth,
                "note": "plot: benchmarks/growth.png (dashed: growth in proportion to the smallest size)",
            },
            {
                "what": f"operator peak RSS, {big:,} / {small:,} nodes",
                "value": round(last["peak_rss_mb"] / first["peak_rss_mb"], 2),
                "unit": "x",
                "target": f"near-linear (the nodes grew {growth:g}x)",
                "met": last["peak_rss_mb"] / first["peak_rss_mb"] <= 1.5 * growth,
                "note": "",
            },
        ]
    return found


def plot(sizes: list[tuple[int, dict[str, Any]]], path: Path) -> None:
    chart(
        [
            Panel("Time to Ready", "s", [(n, r["seconds"]) for n, r in sizes], BLUE),
            Panel("Operator peak RSS", "MB", [(n, r["peak_rss_mb"]) for n, r in sizes], ORANGE),
        ],
        "nodes",
        path,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000, 2_000, 5_000, 10_000])
    parser.add_argument("--plot", type=Path, default=HERE / "growth.png")
    parser.add_argument("--json", action="store_true", help="one JSON object for benchmarks/run.py")
    args = parser.parse_args()
    sizes = []
    for nodes in sorted(args.nodes):
        log = Path(tempfile.mkdtemp(prefix="accelpool-bench-")) / "operator.log"
        sizes.append((nodes, asyncio.run(measure(nodes, nodes // NODES_PER_POOL, 2.0, log))))
        print(f"{nodes} nodes: {sizes[-1][1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    plot(sizes, args.plot)
    found = results(sizes)
    print_results("Growth: the operator from 1,000 to 10,000 nodes", found, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
