"""A health storm: agents flipping AcceleratorHealthy on a converged cluster, and what one such change costs.

On `bench_cluster`'s emulated cluster (default 10,000 nodes, 500 pools, converged to Ready first):

1. **one change**: `--singles` times, one member's agent reports `AcceleratorHealthy=False` (the
   health annotation, then the condition through `nodes/status`, as the agent writes them) while
   nothing else happens; the operator's CPU seconds from that report until 3 s after the node is
   quarantined (its pool's status written, the replacement it claims joined and its burn-in lifted by
   the simulated agent), divided by the passes in that time (`accelpool_reconcile_total`), is what a
   pass after one relevant change costs the operator (its watch events, the plan, the writes; what
   the idle operator spends, measured over 10 s before, is reported beside it);
2. **the storm**: `--rate` relevant changes a second (at 10,000 nodes; in proportion to the nodes at
   other sizes) for `--seconds`, half of them an agent turning a healthy member (each time of
   another pool, round-robin) `False`, half an agent whose member was quarantined at least
   `RECOVER_AFTER` seconds before turning it `True` again (every quarantined member comes back; while
   none is due, the change is another failure). Measured: the time from
   each `False` until the node carries `accelpool.io/quarantined` (p50, p99, none missed); the
   backlog of node events the operator has not handled (as `update_stream` counts it: published
   minus `accelpool_node_events_total`, one scrape a second); the operator's CPU (cores); its
   writes against the minimum the changes need: one node PATCH per quarantine (the taint, the
   remediation record), none for a recovery within the hold-down (`holdDown: 1m`: lifts come after
   the storm), one Event per quarantine, a status PATCH per pool at most once per settle window;
   and the replacement each quarantined member's pool claims (its join and burn-in lift, the
   lift's Event), which the convergence benchmarks count the same way.

The CPU per change, the storm's CPU and its p99 are plotted over the cluster's size (`--plot`,
default `benchmarks/health_storm.png`) as `growth.png` plots convergence.

At each size (nodes, and a pool per 20 nodes, as 10,000 x 500) the cluster is started afresh; the
targets (issue 30) are for 10,000 x 500, the smaller sizes show how the figures grow.

    .venv/bin/python benchmarks/health_storm.py [--nodes 1000 2000 5000 10000] [--rate 50 --seconds 60] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from accelpool_api import conventions
from bench_cluster import NODES, Running, live, operator_writes, pools, running
from png_chart import BLUE, ORANGE, Panel, chart
from report import print_results
from update_stream import NodeEvents, handled, percentile

HERE = Path(__file__).resolve().parent
NODES_PER_POOL = 20
"""As `operator_growth`: 10,000 nodes x 500 pools."""
RECOVER_AFTER = 5.0
"""A quarantined member's agent reports it healthy again this long after its quarantine, at the earliest."""
POLL_SECONDS = 0.02
STAGES = "accelpool_reconcile_stage_seconds_total"


def _condition(stored: dict[str, Any], status: str, reason: str) -> list[dict[str, Any]]:
    health = {"type": conventions.HEALTH_CONDITION, "status": status, "reason": reason,
              "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    others = [c for c in (stored.get("status") or {}).get("conditions") or [] if c["type"] != health["type"]]
    return [*others, health]


async def report(cluster: Running, node: str, healthy: bool) -> float:
    """The agent's report on `node` (annotation, then condition); returns when the condition was written."""
    stored = cluster.emulator.store.get(NODES, None, node) or {}
    pool = (stored["metadata"].get("labels") or {}).get(conventions.POOL_LABEL)
    status, reason = ("Healthy", "AllChecksPassed") if healthy else ("Unhealthy", "XidError79")
    verdict = {"status": status, "reason": reason, "complete": True, "pool": pool}
    await cluster.patch(
        f"/api/v1/nodes/{node}", {"metadata": {"annotations": {conventions.HEALTH_ANNOTATION: json.dumps(verdict)}}}
    )
    stored = cluster.emulator.store.get(NODES, None, node) or {}
    written = time.monotonic()
    condition = _condition(stored, "True" if healthy else "False", reason)
    await cluster.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": condition}})
    return written


def quarantined(cluster: Running, node: str) -> bool:
    taints = ((cluster.emulator.store.get(NODES, None, node) or {}).get("spec") or {}).get("taints") or []
    return any(t.get("key") == conventions.QUARANTINE_TAINT_KEY for t in taints)


def candidates(cluster: Running) -> list[str]:
    """Healthy, unquarantined members, round-robin over the pools (each pool's first, then each one's second...)."""
    by_pool: dict[str, list[str]] = {}
    for body in live(cluster.emulator, "v1/nodes"):
        pool = (body["metadata"].get("labels") or {}).get(conventions.POOL_LABEL)
        taints = (body.get("spec") or {}).get("taints") or []
        if pool is None or any(t.get("key") == conventions.QUARANTINE_TAINT_KEY for t in taints):
            continue
        by_pool.setdefault(pool, []).append(body["metadata"]["name"])
    queues = [sorted(names) for _, names in sorted(by_pool.items())]
    order: list[str] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        order += [q[depth] for q in queues if depth < len(q)]
    return order


async def until_quarantined(cluster: Running, node: str, since: float, within: float = 60.0) -> float:
    while time.monotonic() - since < within:
        if quarantined(cluster, node):
            return time.monotonic() - since
        await asyncio.sleep(POLL_SECONDS)
    raise TimeoutError(f"{node} was not quarantined within {within:g} s")


async def singles(cluster: Running, nodes: list[str], count: int) -> dict[str, Any]:
    """Step 1 of the module docstring: the operator's CPU per relevant change, less its idle CPU."""
    idle_started, idle_cpu = time.monotonic(), cluster.stats().cpu_seconds
    await asyncio.sleep(10.0)
    idle_rate = (cluster.stats().cpu_seconds - idle_cpu) / (time.monotonic() - idle_started)
    costs, latencies, passes = [], [], []
    for node in nodes[:count]:
        passes_before = await cluster.metric('accelpool_reconcile_total{result="success"}')
        await asyncio.sleep(1.0)  # what the scrape (rendering /metrics for every pool) cost is not counted
        cpu = cluster.stats().cpu_seconds
        written = await report(cluster, node, healthy=False)
        latencies.append(await until_quarantined(cluster, node, written))
        await asyncio.sleep(3.0)  # the status write (settled) and anything else the change caused
        spent = cluster.stats().cpu_seconds - cpu  # the idle operator's share is reported, not subtracted
        costs.append(spent)
        passes.append(await cluster.metric('accelpool_reconcile_total{result="success"}') - passes_before)
    return {"idle_cores": idle_rate, "costs": costs, "latencies": latencies, "passes": passes}


async def storm(cluster: Running, nodes: list[str], rate: float, seconds: float) -> dict[str, Any]:
    """Step 2 of the module docstring."""
    published, processed = NodeEvents(cluster), await handled(cluster)
    since, cpu = cluster.emulator.request_count, cluster.stats().cpu_seconds
    passes_before = await cluster.metric('accelpool_reconcile_total{result="success"}')
    stages_before = await stage_seconds(cluster)
    started, own_cpu = time.monotonic(), time.process_time()
    recoverable: list[tuple[float, str]] = []  # (quarantined at, node): to recover, oldest first
    pending: dict[str, float] = {}
    latencies: list[tuple[float, float]] = []  # (failed at, seconds to quarantine)
    fails = recoveries = 0
    queue = iter(nodes)
    tasks: set[asyncio.Task[Any]] = set()

    async def fail(node: str) -> None:
        written = await report(cluster, node, healthy=False)
        if quarantined(cluster, node):  # quarantined before the watcher heard of the report
            latencies.append((written - started, time.monotonic() - written))
            recoverable.append((time.monotonic(), node))
        else:
            pending[node] = written

    async def recover(node: str) -> None:
        await report(cluster, node, healthy=True)

    async def sender() -> None:
        nonlocal fails, recoveries
        sent = 0
        while (now := time.monotonic()) - started < seconds:
            due = int((now - started) * rate)
            while sent < due:
                if sent % 2 == 1 and recoverable and now - recoverable[0][0] >= RECOVER_AFTER:
                    _, node = recoverable.pop(0)
                    task = asyncio.create_task(recover(node))
                    recoveries += 1
                else:
                    fresh = next(queue, None)
                    if fresh is None:
                        raise RuntimeError("every member has failed: a smaller --rate or a larger cluster")
                    task = asyncio.create_task(fail(fresh))
                    fails += 1
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += 1
            await asyncio.sleep(0.01)

    async def watcher() -> None:
        """Follows the emulator's node events (reading every pending node each round would cost the emulator's
        process, which the operator's writes wait on, more than the operator spends)."""
        events = cluster.emulator.store.events
        cursor = events.latest()
        while True:
            changed, cursor = events.after(cursor, NODES)
            now = time.monotonic()
            for event in changed:
                name = event.object["metadata"]["name"]
                taints = (event.object.get("spec") or {}).get("taints") or []
                if name in pending and any(t.get("key") == conventions.QUARANTINE_TAINT_KEY for t in taints):
                    latencies.append((pending[name] - started, now - pending.pop(name)))
                    recoverable.append((now, name))
            await asyncio.sleep(POLL_SECONDS)

    watching = asyncio.create_task(watcher())
    sending = asyncio.create_task(sender())
    backlog: list[float] = []
    cores: list[float] = []
    last_cpu, last_at = cpu, started
    while not sending.done():
        await asyncio.sleep(1.0)
        done = await handled(cluster) - processed
        backlog.append(published.read() - done)
        now_cpu, now = cluster.stats().cpu_seconds, time.monotonic()
        cores.append((now_cpu - last_cpu) / (now - last_at))
        last_cpu, last_at = now_cpu, now
    await sending
    await asyncio.gather(*tasks)
    storm_cores = (cluster.stats().cpu_seconds - cpu) / (time.monotonic() - started)
    emulator_cores = (time.process_time() - own_cpu) / (time.monotonic() - started)
    for _ in range(300):  # at most 30 s for the quarantines still to come
        if not pending:
            break
        await asyncio.sleep(0.1)
    missed = sorted(pending)
    watching.cancel()
    dump = [
        {"path": w.path, "body": w.request.data}
        for w in cluster.emulator.writes(since=since)
        if w.user_agent.startswith("accelpool") and w.path.startswith("/api/v1/nodes/") and not w.refused
    ]
    await asyncio.sleep(3.0)  # statuses settle
    done = await handled(cluster) - processed
    final_backlog = published.read() - done
    passes = await cluster.metric('accelpool_reconcile_total{result="success"}') - passes_before
    stages = Counter(await stage_seconds(cluster))
    stages.subtract(stages_before)
    writes = operator_writes(cluster.emulator, since)
    node_writes = Counter(
        w.path.removeprefix("/api/v1/nodes/").split("/")[0]
        for w in cluster.emulator.writes(since=since)
        if w.user_agent.startswith("accelpool") and w.path.startswith("/api/v1/nodes/") and not w.refused
    )
    return {
        "fails": fails,
        "recoveries": recoveries,
        "latencies": latencies,
        "missed": missed,
        "backlog": backlog,
        "final_backlog": final_backlog,
        "cores": storm_cores,
        "emulator_cores": emulator_cores,
        "cores_each_second": cores,
        "passes": passes,
        "stages": dict(stages),
        "writes": dict(writes),
        "node_writes": node_writes,
        "quarantined": [n for n in nodes[:fails] if quarantined(cluster, n)],
        "dump": dump,
    }


async def stage_seconds(cluster: Running) -> dict[str, float]:
    """Seconds the operator's passes have spent in each stage (`accelpool_reconcile_stage_seconds_total`)."""
    found = {}
    for line in (await cluster.metrics()).splitlines():
        if line.startswith(STAGES):
            sample, value = line.rsplit(" ", 1)
            found[sample.removeprefix(STAGES).strip('{}"').removeprefix('stage="')] = float(value)
    return found


async def measure(nodes: int, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    profile = args.profile / f"operator-{nodes}.prof" if args.profile is not None else None
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    async with running(nodes, log, profile) as cluster:
        started = time.monotonic()
        applied = pools(nodes, args.pools)
        await cluster.apply(applied)
        ready = await cluster.until_ready(applied, started)
        await asyncio.sleep(args.settle)
        members = candidates(cluster)
        print(f"{nodes} nodes: Ready in {ready:.1f} s; single changes", file=sys.stderr, flush=True)
        single = await singles(cluster, members, args.singles)
        print(f"{nodes} nodes: the storm, {args.seconds:g} s", file=sys.stderr, flush=True)
        stormed = await storm(cluster, members[args.singles :], rate(nodes, args), args.seconds)
        stats = cluster.stats()
    return {"ready": ready, "single": single, "storm": stormed, "rss_mb": stats.rss_mb}


def rate(nodes: int, args: argparse.Namespace) -> float:
    """`--rate` at 10,000 nodes, in proportion to the nodes at other sizes."""
    return float(args.rate) * nodes / 10_000


def minimum(stormed: dict[str, Any]) -> tuple[int, str]:
    """The node writes the storm needs: one per quarantine, and each replacement's join and burn-in lift."""
    quarantines = len(stormed["latencies"])
    node_writes: Counter[str] = stormed["node_writes"]
    quarantined = set(stormed["quarantined"])
    replacements = sum(1 for node in node_writes if node not in quarantined)
    need = quarantines + 2 * replacements
    return need, f"{quarantines} quarantines (1 each) + {replacements} replacements claimed (join + burn-in lift)"


def results(nodes: int, args: argparse.Namespace, report: dict[str, Any]) -> list[dict[str, Any]]:
    where = f"{nodes:,} nodes x {args.pools} pools"
    large = nodes >= 10_000
    single = report["single"]
    per_change = statistics.median(single["costs"]) * 1000
    per_pass = _per_pass(report) * 1000
    stormed = report["storm"]
    at = f"{where}, {rate(nodes, args):g} relevant changes/s for {args.seconds:g} s"
    latencies = [seconds for _, seconds in stormed["latencies"]]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    backlog = stormed["backlog"]
    half = len(backlog) // 2
    growing = statistics.mean(backlog[half:]) > statistics.mean(backlog[:half] or [0]) + rate(nodes, args)
    need, why = minimum(stormed)
    node_writes = sum(stormed["node_writes"].values())
    writes = stormed["writes"]
    return [
        {
            "what": f"{where}: operator CPU per pass after one node's relevant change (watch, plan, writes)",
            "value": round(per_pass, 1),
            "unit": "ms",
            "target": "<= 20 ms (at 10,000 x 500)" if large else "-",
            "met": per_pass <= 20 if large else None,
            "note": f"per change (the quarantine, then the replacement the pool claims: its join, its agent's "
            f"report, its burn-in lift) median {per_change:.0f} ms; each: "
            f"{', '.join(f'{c * 1000:.0f}' for c in single['costs'])} ms, over "
            f"{', '.join(f'{p:.0f}' for p in single['passes'])} passes; idle operator "
            f"{single['idle_cores']:.3f} cores (not subtracted); quarantined in "
            f"{', '.join(f'{s:.2f}' for s in single['latencies'])} s; "
            f"converged to Ready first in {report['ready']:.1f} s",
        },
        {
            "what": f"{at}: AcceleratorHealthy=False → quarantine taint, p99",
            "value": round(p99, 3),
            "unit": "s",
            "target": "<= 5 s, none missed",
            "met": p99 <= 5 and not stormed["missed"],
            "note": f"p50 {p50:.3f} s over {len(latencies)} quarantines ({stormed['fails']} failures, "
            f"{stormed['recoveries']} recoveries sent); missed: {len(stormed['missed'])}",
        },
        {
            "what": f"{at}: node events not yet handled (largest sampled)",
            "value": max(backlog),
            "unit": "events",
            "target": "no growing backlog",
            "met": not growing and stormed["final_backlog"] <= rate(nodes, args),
            "note": "backlog each second: "
            + ", ".join(f"{b:.0f}" for b in backlog)
            + f"; 3 s after the storm: {stormed['final_backlog']:.0f}",
        },
        {
            "what": f"{at}: operator CPU",
            "value": round(stormed["cores"], 3),
            "unit": "cores",
            "target": "<= 1 core (at 10,000 x 500)" if large else "-",
            "met": stormed["cores"] <= 1 if large else None,
            "note": f"{stormed['passes']:.0f} passes ({stormed['passes'] / args.seconds:.1f}/s); where their time went "
            f"(wall, `accelpool_reconcile_stage_seconds`): {_stage_split(stormed['stages'])}; each second: "
            + ", ".join(f"{c:.2f}" for c in stormed["cores_each_second"])
            + f"; the benchmark's own process (the emulated API server, the simulated NVIDIA components and agents, "
            f"the load): {stormed['emulator_cores']:.2f} cores; operator RSS after: {report['rss_mb']:.0f} MB",
        },
        {
            "what": f"{at}: node writes / the minimum the changes need",
            "value": round(node_writes / max(1, need), 3),
            "unit": "x",
            "target": "1 x",
            "met": node_writes == need,
            "note": f"{node_writes} node writes vs {need}: {why}; all writes: {writes}",
        },
    ]


def plot(sizes: list[tuple[int, dict[str, Any]]], path: Path) -> None:
    """As `growth.png`: each measure over the cluster's size, proportional growth from the smallest dashed (the
    chart's font has no H, Q or V)."""
    chart(
        [
            Panel("Operator CPU per pass", "ms", [(n, _per_pass(r) * 1000) for n, r in sizes], BLUE),
            Panel("Operator CPU in a storm", "millicores", [(n, r["storm"]["cores"] * 1000) for n, r in sizes], ORANGE),
            Panel("p99 to a taint in a storm", "s", [(n, _p99(r)) for n, r in sizes], BLUE),
        ],
        "nodes",
        path,
    )


def _stage_split(stages: dict[str, float]) -> str:
    total = sum(stages.values()) or 1.0
    return ", ".join(f"{stage} {seconds:.1f} s ({seconds / total:.0%})" for stage, seconds in stages.items() if seconds)


def _per_pass(report: dict[str, Any]) -> float:
    single = report["single"]
    return float(sum(single["costs"])) / max(1.0, float(sum(single["passes"])))


def _p99(report: dict[str, Any]) -> float:
    return percentile([seconds for _, seconds in report["storm"]["latencies"]], 0.99)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000, 2_000, 5_000, 10_000])
    parser.add_argument("--rate", type=float, default=50.0, help="relevant changes per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--singles", type=int, default=5, help="single changes measured before the storm")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between Ready and the measurements")
    parser.add_argument("--plot", type=Path, default=HERE / "health_storm.png")
    parser.add_argument("--dump", type=Path, help="a file: the operator's node writes in the storm, as JSON")
    parser.add_argument("--profile", type=Path, help="a folder: the operator runs under cProfile (operator-N.prof)")
    parser.add_argument("--json", action="store_true", help="one JSON object for benchmarks/run.py")
    args = parser.parse_args()
    sizes: list[tuple[int, dict[str, Any]]] = []
    found: list[dict[str, Any]] = []
    load = os.getloadavg()
    for nodes in sorted(args.nodes):
        args.pools = nodes // NODES_PER_POOL
        log = Path(tempfile.mkdtemp(prefix="accelpool-bench-")) / "operator.log"
        sizes.append((nodes, asyncio.run(measure(nodes, args, log))))
        print(f"{nodes} nodes: p99 {_p99(sizes[-1][1]):.2f} s", file=sys.stderr, flush=True)
        found += results(nodes, args, sizes[-1][1])
        if args.dump is not None:
            args.dump.write_text(json.dumps(sizes[-1][1]["storm"]["dump"], indent=1))
    if len(sizes) > 1:
        plot(sizes, args.plot)
        found[-1]["note"] += f"; growth from {sizes[0][0]:,} nodes: {args.plot.name}"
    end = os.getloadavg()
    found[0]["note"] += (
        f"; load average (1/5/15 min) {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start, "
        f"{end[0]:.1f} / {end[1]:.1f} / {end[2]:.1f} at the end ({os.cpu_count()} CPUs, shared)"
    )
    print_results("A health storm (agents flipping AcceleratorHealthy)", found, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
