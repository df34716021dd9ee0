"""Device agent: /metrics render time for 8 GPUs, RSS at rest, and one full check cycle (fake backend).

The render is what `/metrics` serves in the text format (`accelpool_agent.exposition.render_text`,
the same bytes as prometheus_client's `generate_latest`, which the note reports for comparison).

Targets (DESIGN.md): render ≤ 5 ms median; agent RSS without CUDA ≤ 80 MB; a full check
cycle for 8 GPUs ≤ 60 s. RSS and the cycle are measured on the real `accelpool-agent`
processes (the cycle through `accelpool-agent check`, child processes and all).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.exposition import render_text
from accelpool_agent.metrics import build_registry
from accelpool_core.protocol import AgentConfig

BIN = Path(sys.executable).parent


def render_times(samples: int, encoder: Callable[[CollectorRegistry], bytes] = render_text) -> list[float]:
    accelerator, count = parse_fake_gpus("H100:8")
    agent = Agent(
        FakeBackend(accelerator, count, faults={}, seed=0),
        AgentConfig(pool="bench"),
        AgentSettings(node_name="bench-node", backend="fake", seed=0),
        InlineRunner(),
        clock=ManualClock(),
    )
    agent.open()
    asyncio.run(agent.full_cycle())
    registry: CollectorRegistry = build_registry(lambda: agent.snapshot)
    for _ in range(20):
        encoder(registry)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        encoder(registry)
        times.append(time.perf_counter() - start)
    return times


def rss_at_rest(settle_seconds: float) -> float:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(BIN / "accelpool-agent"), "run", "--backend", "fake", "--fake-gpus", "H100:8", "--no-report"]
    command += ["--node-name", "bench", "--listen", f"127.0.0.1:{port}"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    if b"accelpool_node_last_cycle_timestamp_seconds" in response.read():
                        break
            except OSError:
                pass
            time.sleep(0.2)
        time.sleep(settle_seconds)
        status = Path(f"/proc/{process.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        return kib * 1024 / 1e6
    finally:
        process.terminate()
        process.wait(timeout=10)


def cycle_seconds() -> float:
    command = [str(BIN / "accelpool-agent"), "check", "--backend", "fake", "--fake-gpus", "H100:8", "--json"]
    report = json.loads(subprocess.run(command, capture_output=True, text=True, check=False).stdout)
    duration: float = report["cycle_duration_seconds"]
    return duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    times = render_times(args.samples)
    median_ms = statistics.median(times) * 1000
    p99_ms = sorted(times)[int(len(times) * 0.99) - 1] * 1000
    library_ms = statistics.median(render_times(args.samples, generate_latest)) * 1000
    rss = rss_at_rest(settle_seconds=5)
    cycle = cycle_seconds()
    results: list[dict[str, Any]] = [
        {"what": "/metrics render, 8 GPUs (median)", "value": median_ms, "unit": "ms", "target": "≤ 5 ms",
         "met": median_ms <= 5, "note": f"p99 {p99_ms:.2f} ms over {args.samples} renders; "
         f"prometheus_client's generate_latest: {library_ms:.2f} ms median"},
        {"what": "agent RSS at rest (fake backend, no CUDA)", "value": rss, "unit": "MB", "target": "≤ 80 MB",
         "met": rss <= 80},
        {"what": "one full check cycle, 8 GPUs (fake)", "value": cycle, "unit": "s", "target": "≤ 60 s",
         "met": cycle <= 60},
    ]  # fmt: skip
    report = {"title": "Device agent (fake backend)", "results": results}
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
