"""`accelpool_gpu_nvlink_*`, `accelpool_gpu_fabric_*` and `accelpool_ib_port_*`: the node's links.

`accelpool_gpu_nvlink_*` are a device's peer links: NVLink on NVIDIA, XGMI (Infinity Fabric) on AMD
Instinct (`vendor="amd"`). Kept cheap: an H100 has 18 NVLinks, so link series are per GPU (links, active
links, each error counter summed over the links), never per link; the check's message names the link. InfiniBand
series are per port (a node has a handful), with `device`, `port` and `link_layer` labels.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from accelpool_agent.metrics.families import GPU_LABELS, NODE_LABELS, Families, as_float, gpu_key
from accelpool_agent.model import NVLINK_COUNTERS
from accelpool_agent.snapshot import AgentSnapshot

IB_PORT_LABELS = (*NODE_LABELS, "device", "port", "link_layer")


class LinkCollector:
    """NVLink and NVSwitch fabric per GPU; InfiniBand / RoCE ports per node."""

    name = "links"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        if report is None:
            return []
        f = Families(GPU_LABELS)
        for gpu in report.gpus:
            t = gpu.telemetry
            if t is None or t.lost:
                continue
            key = gpu_key(snapshot, gpu)
            links = t.nvlinks or t.xgmi_links
            if links:
                doc = "Peer links the GPU has (NVLink; XGMI on AMD)."
                f.gauge("accelpool_gpu_nvlink_links", doc, key, float(len(links)))
                f.gauge(
                    "accelpool_gpu_nvlink_links_active",
                    "Peer links that are up; fewer than accelpool_gpu_nvlink_links means a link is down.",
                    key,
                    float(sum(link.active for link in links)),
                )
                for counter in NVLINK_COUNTERS:
                    values = [link.errors[counter] for link in links if counter in link.errors]
                    f.counter(
                        "accelpool_gpu_nvlink_errors_total",
                        "NVLink data-link errors summed over the GPU's links since the driver loaded, by counter "
                        "(replay, recovery, crc_flit, crc_data).",
                        key,
                        float(sum(values)) if values else None,
                        [("counter", counter)],
                    )
            if t.fabric is not None and t.fabric.state != "not_supported":
                registered = t.fabric.state == "completed" and t.fabric.status == 0
                f.gauge(
                    "accelpool_gpu_fabric_registered",
                    "1 when the GPU completed its NVSwitch fabric registration successfully.",
                    key,
                    float(registered),
                )
                f.gauge(
                    "accelpool_gpu_fabric_bandwidth_degraded",
                    "1 when the NVSwitch fabric reports degraded NVLink bandwidth for the GPU.",
                    key,
                    as_float(t.fabric.degraded_bandwidth),
                )
        families = list(f.families.values())
        ib = Families(IB_PORT_LABELS)
        for port in report.infiniband:
            key = [snapshot.node, snapshot.pool or "", port.device, str(port.port), port.link_layer]
            ib.gauge(
                "accelpool_ib_port_state",
                "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (sysfs ports/<n>/state).",
                key,
                float(port.state),
            )
            ib.gauge(
                "accelpool_ib_port_phys_state",
                "Physical port state: 2 Polling, 3 Disabled, 5 LinkUp, ... (sysfs ports/<n>/phys_state).",
                key,
                float(port.phys_state),
            )
            ib.gauge(
                "accelpool_ib_port_rate_bits_per_second",
                "The port's active rate.",
                key,
                port.rate_gbps * 1e9 if port.rate_gbps is not None else None,
            )
            for counter, value in sorted(port.counters.items()):
                ib.counter(
                    "accelpool_ib_port_errors_total",
                    "Port error counters (sysfs ports/<n>/counters), by counter; they saturate at their maximum.",
                    key,
                    float(value),
                    [("counter", counter)],
                )
        return [*families, *ib.families.values()]
