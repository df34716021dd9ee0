"""Health rules: telemetry and measurements in, pass / warn / fail with a reason out.

Pure functions, the agent's functional core; every rule has unit tests on the fake backend.

- `rules.telemetry`: per GPU, from its latest readings and XIDs (device, xid, ecc, row_remap,
  retired_pages, thermal), every telemetry tick, with `rules.links` (pcie_link, nvlink, fabric)
  and `rules.power` (power, clocks);
- `rules.host`: node-wide (gpu_count, infiniband); `rules.rates`: error counters' rates over a
  window; `rules.findings`: each result's severity and ladder step, and the node's findings;
- `rules.compute`: per GPU, from its compute child's measurements (sanity, correctness, matmul,
  bandwidth), and the peer comparison across the node's GPUs, every compute cycle;
- `rules.node`: the node's verdict (Healthy, Unhealthy, Unknown) from its GPUs' reports;
- `rules.policy`: the thresholds (`Policy`, from the pool's AgentConfig) and what a healthy GPU
  of a model reaches (`Expected`, from the config or the catalog).
- `rules.amd`, `rules.neuron`, `rules.tpu`: each vendor's own rules, and `rules.vendor`, which picks
  them by backend name and merges their results with the generic ones (`AgentState` calls it per device).

The names below are the rules' public interface; import them from `accelpool_agent.rules`.
"""

from __future__ import annotations

from accelpool_agent.rules.compute import (
    ComputeOutcome,
    compute_checks,
    mark_slower_than_peers,
    peer_outliers,
)
from accelpool_agent.rules.findings import ACTIONS, findings, severity, with_action
from accelpool_agent.rules.host import IB_LIMITS, gpu_count_rule, infiniband_rule
from accelpool_agent.rules.links import NVLINK_LIMITS, fabric_rule, nvlink_rule, pcie_rule
from accelpool_agent.rules.node import NodeVerdict, node_verdict
from accelpool_agent.rules.policy import Expected, Policy, expected_for
from accelpool_agent.rules.power import clocks_rule, power_rule
from accelpool_agent.rules.rates import CounterWindow
from accelpool_agent.rules.telemetry import (
    POWER_REASONS,
    RECENT_XIDS_KEPT,
    RETIRED_PAGES_LIMIT,
    THERMAL_REASONS,
    XidRecord,
    device_rule,
    ecc_rule,
    recovery_rule,
    retired_pages_rule,
    row_remap_rule,
    telemetry_checks,
    thermal_rule,
    xid_rule,
)

__all__ = [
    "ACTIONS",
    "IB_LIMITS",
    "NVLINK_LIMITS",
    "POWER_REASONS",
    "RECENT_XIDS_KEPT",
    "RETIRED_PAGES_LIMIT",
    "THERMAL_REASONS",
    "ComputeOutcome",
    "CounterWindow",
    "Expected",
    "NodeVerdict",
    "Policy",
    "XidRecord",
    "clocks_rule",
    "compute_checks",
    "device_rule",
    "ecc_rule",
    "expected_for",
    "fabric_rule",
    "findings",
    "gpu_count_rule",
    "infiniband_rule",
    "mark_slower_than_peers",
    "node_verdict",
    "nvlink_rule",
    "pcie_rule",
    "peer_outliers",
    "power_rule",
    "recovery_rule",
    "retired_pages_rule",
    "row_remap_rule",
    "severity",
    "telemetry_checks",
    "thermal_rule",
    "with_action",
    "xid_rule",
]
