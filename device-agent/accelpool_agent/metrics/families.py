"""Building blocks of the agent's collectors: label sets, and metric families made on first use.

Per-device series (`accelpool_gpu_*`, the accelerator-neutral family: a "GPU" there is any accelerator
device, an AMD GPU, a Neuron device or a TPU chip too) carry `node`, `pool`, `gpu` (index), `uuid` and
`vendor` (the catalog vendor: nvidia, amd, aws, google; `GPU_LABELS`), so one dashboard serves every
pool; node-wide ones
`node` and `pool` (`NODE_LABELS`). "No data" is an absent series, never a zero: `Families`
creates a family on first use but adds a sample only for a value that is not None.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

from accelpool_agent.backends import device_vendor
from accelpool_agent.model import GpuReport
from accelpool_agent.snapshot import AgentSnapshot

GPU_LABELS = ("node", "pool", "gpu", "uuid", "vendor")
NODE_LABELS = ("node", "pool")


def gpu_key(snapshot: AgentSnapshot, gpu: GpuReport) -> list[str]:
    vendor = device_vendor(gpu.device.model, snapshot.backend)
    return [snapshot.node, snapshot.pool or "", str(gpu.device.index), gpu.device.uuid, vendor]


class Families:
    """Gauge families created on first use, in first-use order (keeps the exposition stable)."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self.families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}

    def gauge(
        self, name: str, doc: str, key: list[str], value: float | None, extra: Sequence[tuple[str, str]] = ()
    ) -> None:
        family = self.families.get(name)
        if not isinstance(family, GaugeMetricFamily):
            family = GaugeMetricFamily(name, doc, labels=[*self.labels, *(k for k, _ in extra)])
            self.families[name] = family
        if value is not None:
            family.add_metric([*key, *(v for _, v in extra)], float(value))

    def counter(
        self, name: str, doc: str, key: list[str], value: float | None, extra: Sequence[tuple[str, str]] = ()
    ) -> None:
        family = self.families.get(name)
        if not isinstance(family, CounterMetricFamily):
            family = CounterMetricFamily(name, doc, labels=[*self.labels, *(k for k, _ in extra)])
            self.families[name] = family
        if value is not None:
            family.add_metric([*key, *(v for _, v in extra)], float(value))


def as_float(value: bool | None) -> float | None:
    return None if value is None else float(value)
