"""Device agent alone: XID 79 on a fake GPU → `AcceleratorHealthy=False` on its node, from a cold start.

The real `accelpool-agent run` process (fake backend, `--fault 3:xid=79`, telemetry every 0.5 s)
reports to the demo's emulated API server, which holds one node of the agent's pool. Measured:
from spawning the process to the node carrying the condition False/XidError79 and the
annotation. The agent's share of DESIGN.md's "XID on a fake GPU → quarantine taint ≤ 5 s"
(`fault_to_quarantine.py` measures the whole path, operator included), so the same target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from accelpool_core.protocol import CONDITION_TYPE, CONFIG_ENV, HEALTH_ANNOTATION, POOL_LABEL
from accelpool_demo.apiserver import RunningApiServer, serving

NODE = "gpu-bench"
POOL = "bench"


def node_object() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": {POOL_LABEL: POOL}, "annotations": {}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}]},
    }


def reported(api: RunningApiServer) -> bool:
    raw = api.get(f"/api/v1/nodes/{NODE}") or {}
    conditions = [c for c in raw["status"]["conditions"] if c["type"] == CONDITION_TYPE]
    annotated = HEALTH_ANNOTATION in (raw["metadata"].get("annotations") or {})
    return annotated and [(c["status"], c["reason"]) for c in conditions] == [("False", "XidError79")]


async def one_round(within: float) -> float:
    async with serving() as api:
        server = api.url
        async with api.client() as client:
            await client.create("/api/v1/nodes", node_object())  # as the kubelet would: a resourceVersion
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "accelpool_agent", "run", "--backend", "fake", "--fake-gpus", "H100:8",
            "--fault", "3:xid=79", "--server", server, "--node-name", NODE,
            "--listen", "127.0.0.1:0", "--telemetry-interval", "0.5",
            env={**os.environ, "LOG_LEVEL": "WARNING", CONFIG_ENV: json.dumps({"pool": POOL})},
        )  # fmt: skip
        try:
            while not reported(api):
                if time.monotonic() - started > within:
                    raise TimeoutError(f"the node was not reported Unhealthy within {within} s")
                await asyncio.sleep(0.02)
            return time.monotonic() - started
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    latencies = [asyncio.run(one_round(within=60)) for _ in range(args.rounds)]
    median = statistics.median(latencies)
    results = [
        {
            "what": "XID 79 on a fake GPU → AcceleratorHealthy=False on the node, from the agent's start (median)",
            "value": median,
            "unit": "s",
            "target": "≤ 5 s",
            "met": median <= 5,
            "note": "each round: " + ", ".join(f"{x:.2f} s" for x in latencies) + " (process start included)",
        }
    ]
    report = {"title": "Device agent: XID to the node condition (agent and emulated API server)", "results": results}
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
