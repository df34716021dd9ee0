"""The thresholds the health rules apply and what a healthy GPU should reach.

`Policy` comes from the pool's `AgentConfig`; `Expected` is a GPU model's dense peak TFLOPS per
dtype and its memory bandwidth, from the config when the pool sets them, else from the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accelpool_agent.model import DeviceInfo
from accelpool_core import catalog
from accelpool_core.protocol import AgentConfig


@dataclass(frozen=True)
class Policy:
    """The thresholds the rules apply (from AgentConfig)."""

    dtype: str = "bf16"
    min_efficiency: float = 0.6
    min_bandwidth_efficiency: float = 0.6
    peer_tolerance: float = 0.85
    """Warn when a GPU's matmul is below this fraction of the node's median (3+ GPUs)."""
    check_timeout_seconds: float = 120.0
    xid_warning_window_seconds: float = 3600.0
    """How long a warning, unexpected, unknown or application XID keeps the GPU in `warn`."""
    xid_repeat_limit: int = 10
    """An application XID (13, 31, ...) seen this often within the warning window fails the GPU."""
    counter_window_seconds: float = 600.0
    """NVLink and InfiniBand error counters are judged on their rate over this window."""
    busy_utilization: float = 0.8
    """A GPU at least this utilized is loaded: PCIe generation, P-state and clocks are judged only then."""
    clocks_low_ratio: float = 0.5
    """A loaded GPU whose SM clock is below this fraction of its maximum, unexplained, warns."""
    power_margin: float = 0.1
    """A draw above the enforced power limit by more than this fraction warns."""

    @classmethod
    def from_config(cls, config: AgentConfig) -> Policy:
        return cls(
            dtype=config.matmul.dtype,
            min_efficiency=config.matmul.min_efficiency,
            min_bandwidth_efficiency=config.min_bandwidth_efficiency,
            check_timeout_seconds=config.check_timeout_seconds,
        )


@dataclass(frozen=True)
class Expected:
    """What a healthy GPU of this model should reach."""

    tflops: Mapping[str, float] = field(default_factory=dict)
    bandwidth_bytes_per_second: float | None = None


def expected_for(device: DeviceInfo, config: AgentConfig) -> Expected:
    """The config's peaks when it sets them, else the catalog's for the device's model (or the pool's)."""
    accelerator: catalog.Accelerator | None = None
    for name in (device.model, config.accelerator):
        if name:
            try:
                accelerator = catalog.lookup(name)
                break
            except catalog.UnknownAcceleratorError:
                continue
    tflops: dict[str, float] = dict(config.expected_tflops)
    if not tflops and accelerator is not None:
        for dtype in ("fp32", "tf32", "fp16", "bf16"):
            peak = accelerator.peaks.get(dtype)
            if peak:
                tflops[dtype] = float(peak)
    gbps = config.expected_bandwidth_gbps or (accelerator.bandwidth_gbps if accelerator else None)
    return Expected(tflops=tflops, bandwidth_bytes_per_second=gbps * 1e9 if gbps else None)
