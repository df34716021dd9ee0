"""The /metrics exposition: a golden file for a fixed fake node, and the exporter's conventions.

Regenerate the golden file after an intended change with `UPDATE_GOLDENS=1 pytest tests/unit/agent`
and review the diff.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from accelpool_agent.clock import ManualClock
from accelpool_agent.exposition import render_text
from accelpool_agent.metrics import (
    AgentCollector,
    CheckCollector,
    Exporter,
    GpuCollector,
    LinkCollector,
    NodeCollector,
    build_registry,
)
from accelpool_agent.snapshot import AgentSnapshot

from .conftest import MakeAgent

GOLDEN = Path(__file__).parent / "golden" / "metrics_fake_h100x4.prom"


def registry_for(snapshot: AgentSnapshot, collectors: Iterable[object] | None = None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    chosen = (
        list(collectors)
        if collectors is not None
        else [
            GpuCollector(),
            LinkCollector(),
            CheckCollector(),
            NodeCollector(),
            AgentCollector(version="0.0.0-test"),
        ]
    )
    registry.register(Exporter(lambda: snapshot, chosen, timer=lambda: 0.0))  # type: ignore[arg-type]
    return registry


async def golden_snapshot(make_agent: MakeAgent) -> AgentSnapshot:
    agent = make_agent("H100:4", ["1:xid=79", "2:hot", "3:slow-matmul=2"], clock=ManualClock())
    await agent.full_cycle()
    return agent.snapshot


async def test_golden_exposition(make_agent: MakeAgent) -> None:
    text = generate_latest(registry_for(await golden_snapshot(make_agent))).decode()
    if os.environ.get("UPDATE_GOLDENS") == "1":
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), "run with UPDATE_GOLDENS=1 to create the golden file"
    assert text == GOLDEN.read_text()


async def test_exposition_is_valid_and_follows_the_naming_rules(make_agent: MakeAgent) -> None:
    text = generate_latest(registry_for(await golden_snapshot(make_agent))).decode()
    families = list(text_string_to_metric_families(text))
    assert len(families) > 40
    for family in families:
        assert family.name.startswith("accelpool_"), family.name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", family.name)
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        for sample in family.samples:
            for label in sample.labels:
                assert re.fullmatch(r"[a-z][a-z0-9_]*", label), (family.name, label)
            if family.name.startswith(("accelpool_gpu_", "accelpool_check_")):
                assert {"node", "pool", "gpu", "uuid"} <= set(sample.labels), sample


async def test_values_come_from_the_snapshot(make_agent: MakeAgent) -> None:
    text = generate_latest(registry_for(await golden_snapshot(make_agent))).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }

    def value(name: str, **labels: str) -> float:
        found = [v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    assert value("accelpool_node_healthy") == 0.0
    assert value("accelpool_node_health_status", status="Unhealthy") == 1.0
    assert value("accelpool_node_unhealthy_gpus") == 2.0
    assert value("accelpool_gpu_xid_errors_total", gpu="1", xid="79") == 1.0
    assert value("accelpool_gpu_last_xid", gpu="1") == 79.0
    assert value("accelpool_check_status", gpu="1", check="xid") == 2.0
    assert value("accelpool_check_status", gpu="2", check="thermal") == 1.0
    assert value("accelpool_check_status", gpu="3", check="matmul", reason="SlowMatmul") == 2.0
    assert value("accelpool_gpu_clock_throttle", gpu="2", reason="hw_thermal_slowdown") == 1.0
    assert value("accelpool_gpu_clock_throttle", gpu="0", reason="hw_thermal_slowdown") == 0.0
    assert value("accelpool_gpu_memory_total_bytes", gpu="0") == 80 * 2**30
    assert value("accelpool_gpu_power_limit_watts", gpu="0") == 700.0
    assert 0.78 < value("accelpool_check_matmul_efficiency_ratio", gpu="0", dtype="bf16") < 0.82
    assert 0.38 < value("accelpool_check_matmul_efficiency_ratio", gpu="3", dtype="bf16") < 0.42
    assert value("accelpool_gpu_ecc_errors_total", gpu="0", scope="volatile", error_type="double_bit") == 0.0
    assert value("accelpool_agent_scrape_collector_success", collector="gpu") == 1.0


async def test_a_failing_collector_costs_only_its_own_families(make_agent: MakeAgent) -> None:
    class Broken:
        name = "broken"

        def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
            raise RuntimeError("boom")

    snapshot = await golden_snapshot(make_agent)
    text = generate_latest(registry_for(snapshot, [Broken(), NodeCollector()])).decode()
    assert 'accelpool_agent_scrape_collector_success{collector="broken",node="gpu-a1",pool="llm-training"} 0.0' in text
    assert 'accelpool_agent_scrape_collector_success{collector="node",node="gpu-a1",pool="llm-training"} 1.0' in text
    assert "accelpool_node_healthy" in text


def test_scrape_durations_are_measured() -> None:
    ticks = iter([0.0, 0.25, 1.0, 1.5])
    snapshot = AgentSnapshot(node="n", pool=None, backend="fake", backend_error=None, report=None, started_at=0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Exporter(lambda: snapshot, [NodeCollector(), AgentCollector("x")], timer=lambda: next(ticks)))
    text = generate_latest(registry).decode()
    assert 'accelpool_agent_scrape_collector_duration_seconds{collector="node",node="n",pool=""} 0.25' in text
    assert 'accelpool_agent_scrape_collector_duration_seconds{collector="agent",node="n",pool=""} 0.5' in text


async def test_no_backend_means_no_gpu_series_and_backend_down() -> None:
    from accelpool_agent.agent import Agent
    from accelpool_agent.backends.nvml import NvmlBackend
    from accelpool_agent.compute.runner import InlineRunner
    from accelpool_agent.config import AgentSettings
    from accelpool_core.protocol import AgentConfig

    from .fake_nvml import FakeNvml

    backend = NvmlBackend(FakeNvml(init_error=9))
    agent = Agent(backend, AgentConfig(), AgentSettings("n", "nvml"), InlineRunner(), clock=ManualClock())
    agent.open()
    await agent.full_cycle()
    text = generate_latest(build_registry(lambda: agent.snapshot)).decode()
    assert 'accelpool_agent_backend_up{node="n",pool=""} 0.0' in text
    assert "accelpool_gpu_temperature_celsius{" not in text
    assert 'accelpool_node_health_status{node="n",pool="",status="Unknown"} 1.0' in text


async def test_the_fast_text_render_is_byte_for_byte_prometheus_clients(make_agent: MakeAgent) -> None:
    faults = ["1:xid=79", "2:hot", "3:nvlink-down", "0:ib-flap", "all:nvlink-errors=5", "0:old-driver"]
    agent = make_agent("H100:8", faults, clock=ManualClock())
    await agent.full_cycle()
    registry = build_registry(lambda: agent.snapshot, timer=lambda: 0.0)
    assert render_text(registry) == generate_latest(registry)
    odd = CollectorRegistry(auto_describe=False)
    odd.register(Exporter(lambda: replace(agent.snapshot, node='gpu "a"\\b\nc'), timer=lambda: 0.0))
    assert render_text(odd) == generate_latest(odd)  # label values with quotes, backslashes, newlines


async def test_every_vendors_devices_are_in_the_gpu_family_with_their_vendor(make_agent: MakeAgent) -> None:
    for gpus, vendor in (("MI300X:2", "amd"), ("Trainium2:2", "aws"), ("TPU-v5p:2", "google"), ("H100:2", "nvidia")):
        agent = make_agent(gpus, ["1:lost"], clock=ManualClock())
        await agent.full_cycle()
        text = generate_latest(registry_for(agent.snapshot)).decode()
        healthy = [line for line in text.splitlines() if line.startswith("accelpool_gpu_healthy{")]
        assert len(healthy) == 2 and all(f'vendor="{vendor}"' in line for line in healthy), gpus
        assert re.search(r'accelpool_gpu_healthy\{[^}]*gpu="1"[^}]*\} 0\.0', text), gpus


async def test_each_vendors_own_readings_are_exported(make_agent: MakeAgent) -> None:
    """AMD's XGMI links as the peer-link series, each NeuronCore's utilization, a TPU's TensorCore share."""
    expected = {
        "MI300X:2": r'accelpool_gpu_nvlink_links_active\{[^}]*vendor="amd"\} 7\.0',
        "Trainium2:2": r'accelpool_gpu_core_utilization_ratio\{core="3",[^}]*vendor="aws"\} 0\.9\d*',
        "TPU-v5p:2": r'accelpool_gpu_tensorcore_utilization_ratio\{[^}]*vendor="google"\} 0\.7\d*',
    }
    for gpus, series in expected.items():
        agent = make_agent(gpus, ["all:busy"], clock=ManualClock())
        await agent.full_cycle()
        text = generate_latest(registry_for(agent.snapshot)).decode()
        assert len(re.findall(series, text)) == 2, (gpus, series)
