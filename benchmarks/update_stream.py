"""A sustained stream of unrelated node updates against a converged cluster: does the operator keep up?

On `bench_cluster`'s emulated cluster (default 10,000 nodes, 500 pools, converged to Ready first), a
load generator sends `--rate` node updates per second for `--seconds` that no plan reads, spread over
every node, as a real cluster's kubelets and other controllers do: a label of another controller
(`example.com/rack`), an annotation (`example.com/last-seen`), a kubelet heartbeat (the Ready
condition's `lastHeartbeatTime`, through `nodes/status`). Measured over that stream:

- **backlog**: node events the API server published (its event log) minus those the operator
  handled (`accelpool_node_events_total`, one scrape of /metrics a second: rendering it for 500 pools
  takes the operator's loop a while, so it is not scraped more often); it keeps up when the backlog
  stays small and does not grow;
- **writes**: the operator's API writes during the stream (steady state: none);
- **CPU**: the operator's CPU seconds per second of stream (cores used), from /proc.

Then, with the stream still running for `--probe-seconds`, one agent report per second
turns a member of a different pool `AcceleratorHealthy=False` (the health annotation, then the
condition through `nodes/status`, as the agent writes them), and the time from that condition's write
until the node carries `accelpool.io/quarantined` is measured (p50, p99).

    .venv/bin/python benchmarks/update_stream.py [--nodes 10000 --pools 500 --rate 200 --seconds 60] [--json]
        [--profile DIR]   # the operator under cProfile: DIR/operator.prof
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelpool_api import conventions
from bench_cluster import NODES, Running, live, operator_writes, pools, running
from report import print_results

TICK_SECONDS = 0.05
EVENTS = ('accelpool_node_events_total{relevant="true"}', 'accelpool_node_events_total{relevant="false"}')


class NodeEvents:
    """Counts the node watch events the API server published (read from its event log as they come)."""

    def __init__(self, cluster: Running) -> None:
        self._events = cluster.emulator.store.events
        self._cursor = self._events.latest()
        self.count = 0

    def read(self) -> int:
        newer, self._cursor = self._events.after(self._cursor, NODES)
        self.count += len(newer)
        return self.count


async def handled(cluster: Running) -> float:
    """Node events the operator handled, from one scrape of its /metrics."""
    text = await cluster.metrics()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(EVENTS))


def unrelated_update(cluster: Running, name: str, serial: int) -> tuple[str, dict[str, Any]]:
    """The `serial`th unrelated update: a label, an annotation or a kubelet heartbeat, in turn."""
    kind = serial % 3
    if kind == 0:
        return f"/api/v1/nodes/{name}", {"metadata": {"labels": {"example.com/rack": f"r{serial % 97}"}}}
    if kind == 1:
        return f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"example.com/last-seen": str(serial)}}}
    stored = cluster.emulator.store.get(NODES, None, name) or {}
    conditions = [
        {**c, "lastHeartbeatTime": f"2026-11-23T{serial // 3600 % 24:02d}:{serial // 60 % 60:02d}:{serial % 60:02d}Z"}
        if c.get("type") == "Ready"
        else c
        for c in (stored.get("status") or {}).get("conditions") or []
    ]
    return f"/api/v1/nodes/{name}/status", {"status": {"conditions": conditions}}


async def stream(cluster: Running, names: list[str], rate: float, until: Callable[[], bool], first: int = 0) -> int:
    """Sends `rate` unrelated updates per second, round-robin over `names`, numbered from `first` (every one
    changes its node), until `until()`; returns the next number."""
    sent, started = first, time.monotonic()
    while not until():
        due = first + int((time.monotonic() - started) * rate)
        batch = [unrelated_update(cluster, names[serial % len(names)], serial) for serial in range(sent, due)]
        await asyncio.gather(*(cluster.patch(path, body) for path, body in batch))
        sent = due
        await asyncio.sleep(TICK_SECONDS)
    return sent


async def probe(cluster: Running, node: str) -> float:
    """Seconds from an agent's AcceleratorHealthy=False on `node` to its quarantine taint."""
    stored = cluster.emulator.store.get(NODES, None, node) or {}
    pool = (stored["metadata"].get("labels") or {}).get(conventions.POOL_LABEL)
    report = {"status": "Unhealthy", "reason": "XidError79", "complete": True, "pool": pool}
    await cluster.patch(
        f"/api/v1/nodes/{node}", {"metadata": {"annotations": {conventions.HEALTH_ANNOTATION: json.dumps(report)}}}
    )
    stored = cluster.emulator.store.get(NODES, None, node) or {}
    unhealthy = {"type": conventions.HEALTH_CONDITION, "status": "False", "reason": "XidError79",
                 "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    others = [c for c in (stored.get("status") or {}).get("conditions") or [] if c["type"] != unhealthy["type"]]
    started = time.monotonic()
    await cluster.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": [*others, unhealthy]}})
    while time.monotonic() - started < 60:
        taints = ((cluster.emulator.store.get(NODES, None, node) or {}).get("spec") or {}).get("taints") or []
        if any(t.get("key") == conventions.QUARANTINE_TAINT_KEY for t in taints):
            return time.monotonic() - started
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{node} was not quarantined within 60 s")


def probe_nodes(cluster: Running) -> list[str]:
    """One member of each pool, in turn: each probe's quarantine is its pool's first."""
    first: dict[str, str] = {}
    for body in live(cluster.emulator, "v1/nodes"):
        pool = (body["metadata"].get("labels") or {}).get(conventions.POOL_LABEL)
        if pool is not None:
            first.setdefault(pool, body["metadata"]["name"])
    return [first[pool] for pool in sorted(first)]


async def measure(args: argparse.Namespace, log: Path) -> dict[str, Any]:
    profile = args.profile / "operator.prof" if args.profile is not None else None
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    async with running(args.nodes, log, profile) as cluster:
        started = time.monotonic()
        applied = pools(args.nodes, args.pools)
        await cluster.apply(applied)
        ready = await cluster.until_ready(applied, started)
        await asyncio.sleep(args.settle)
        names = [n["metadata"]["name"] for n in live(cluster.emulator, "v1/nodes")]
        published, processed = NodeEvents(cluster), await handled(cluster)
        since, cpu = cluster.emulator.request_count, cluster.stats().cpu_seconds
        stream_started = time.monotonic()
        ends = stream_started + args.seconds
        sender = asyncio.create_task(stream(cluster, names, args.rate, lambda: time.monotonic() >= ends))
        backlog: list[float] = []
        while not sender.done():
            await asyncio.sleep(1.0)
            done = await handled(cluster) - processed  # scraped first: what was published by then is counted
            backlog.append(published.read() - done)
        sent = await sender
        cores = (cluster.stats().cpu_seconds - cpu) / (time.monotonic() - stream_started)
        writes = operator_writes(cluster.emulator, since)
        probe_ends = time.monotonic() + args.probe_seconds
        sender = asyncio.create_task(stream(cluster, names, args.rate, lambda: time.monotonic() >= probe_ends, sent))
        latencies = []
        for node in probe_nodes(cluster):
            if time.monotonic() >= probe_ends - 1:
                break
            latencies.append(await probe(cluster, node))
            await asyncio.sleep(max(0.0, 1.0 - latencies[-1]))
        await sender
        await asyncio.sleep(2.0)
        done = await handled(cluster) - processed
        final = published.read() - done
        stats = cluster.stats()
    return {
        "ready": ready,
        "sent": sent,
        "backlog": backlog,
        "final_backlog": final,
        "writes": dict(writes),
        "cores": cores,
        "latencies": latencies,
        "rss_mb": stats.rss_mb,
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def results(args: argparse.Namespace, report: dict[str, Any]) -> list[dict[str, Any]]:
    where = f"{args.nodes:,} nodes x {args.pools} pools, {args.rate:g} unrelated updates/s"
    backlog = report["backlog"]
    half = len(backlog) // 2
    growing = statistics.mean(backlog[half:]) > statistics.mean(backlog[:half] or [0]) + args.rate
    writes = sum(report["writes"].values())
    latencies = report["latencies"]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    return [
        {
            "what": f"{where} for {args.seconds:g} s: node events not yet handled (largest sampled)",
            "value": max(backlog),
            "unit": "events",
            "target": "no growing backlog",
            "met": not growing and report["final_backlog"] <= args.rate,
            "note": f"stream: {report['sent']} updates sent ({report['sent'] / args.seconds:.0f}/s); "
            "backlog each second: "
            + ", ".join(f"{b:.0f}" for b in backlog)
            + f"; 2 s after the stream and the probes: {report['final_backlog']:.0f}; "
            f"converged to Ready first in {report['ready']:.1f} s",
        },
        {
            "what": f"{where}: operator writes during the stream",
            "value": writes,
            "unit": "",
            "target": "0",
            "met": writes == 0,
            "note": f"stream writes: {report['writes'] or 'none'}",
        },
        {
            "what": f"{where}: operator CPU during the stream",
            "value": round(report["cores"], 3),
            "unit": "cores",
            "target": "<= 1 core",
            "met": report["cores"] <= 1,
            "note": f"operator RSS after the stream: {report['rss_mb']:.0f} MB",
        },
        {
            "what": f"{where}: AcceleratorHealthy=False → quarantine taint, p99",
            "value": round(p99, 3),
            "unit": "s",
            "target": "<= 5 s",
            "met": p99 <= 5,
            "note": f"p50 {p50:.3f} s over {len(latencies)} quarantines (one a second, each in another pool) "
            f"with the stream running",
        },
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pools", type=int, default=500)
    parser.add_argument("--rate", type=float, default=200.0, help="unrelated node updates per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the stream runs before the probes")
    parser.add_argument("--probe-seconds", type=float, default=30.0, help="how long the probes run (stream on)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between Ready and the stream")
    parser.add_argument("--profile", type=Path, help="a folder: the operator runs under cProfile (operator.prof)")
    parser.add_argument("--json", action="store_true", help="one JSON object for benchmarks/run.py")
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp(prefix="accelpool-bench-")) / "operator.log"
    report = asyncio.run(measure(args, log))
    found = results(args, report)
    title = "A stream of unrelated node updates (load generator)"
    print_results(title, found, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
