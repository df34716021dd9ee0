"""*GPU Node*, the drill-down into one node's GPUs and its agent's checks, as rows of declared panels."""

from __future__ import annotations

from accelpool.cli.dashboards.panels import GPU, NODE, Panel, Row, queries


def rows() -> tuple[Row, ...]:
    """The GPU Node dashboard's rows, top to bottom."""
    return (
        Row(
            "Node",
            (
                Panel(
                    "Node health",
                    "The agent's verdict (node condition AcceleratorHealthy): 1 healthy, 0 unhealthy or unknown.",
                    queries((f"accelpool_node_healthy{{{NODE}}}", "{{node}}")),
                    kind="stat",
                    width=6,
                    height=5,
                    thresholds=((1, "green"),),
                ),
                Panel(
                    "Check results",
                    "The latest result of every check on every GPU: 0 pass, 1 warn, 2 fail, with the reason "
                    "(skipped checks are absent).",
                    queries((f"accelpool_check_status{{{GPU}}}", "")),
                    kind="table",
                    width=18,
                    height=10,
                    thresholds=((1, "orange"), (2, "red")),
                ),
                Panel(
                    "Check cycle",
                    "Seconds since the agent's last full check cycle ended, and how long that cycle took.",
                    queries(
                        (f"time() - accelpool_node_last_cycle_timestamp_seconds{{{NODE}}}", "{{node}} age"),
                        (f"accelpool_node_cycle_duration_seconds{{{NODE}}}", "{{node}} duration"),
                    ),
                    unit="s",
                    width=6,
                    height=5,
                ),
            ),
        ),
        Row(
            "Per GPU",
            (
                Panel(
                    "Utilization",
                    "Fraction of time a kernel ran, per GPU.",
                    queries((f"accelpool_gpu_utilization_ratio{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Memory used",
                    "Device memory in use per GPU.",
                    queries((f"accelpool_gpu_memory_used_bytes{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="bytes",
                    min=0,
                ),
                Panel(
                    "Temperature",
                    "Per GPU, with the lowest slowdown temperature among them.",
                    queries(
                        (f"accelpool_gpu_temperature_celsius{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"min(accelpool_gpu_slowdown_temperature_celsius{{{GPU}}})", "slowdown"),
                    ),
                    unit="celsius",
                ),
                Panel(
                    "Power",
                    "Power draw per GPU, with the lowest power limit among them.",
                    queries(
                        (f"accelpool_gpu_power_watts{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"min(accelpool_gpu_power_limit_watts{{{GPU}}})", "limit"),
                    ),
                    unit="watt",
                    min=0,
                ),
                Panel(
                    "SM clock",
                    "Streaming-multiprocessor clock per GPU against its maximum; it drops under throttling.",
                    queries(
                        (f"accelpool_gpu_sm_clock_hertz{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"max(accelpool_gpu_sm_clock_max_hertz{{{GPU}}})", "max"),
                    ),
                    unit="hertz",
                    min=0,
                ),
                Panel(
                    "Clock throttling",
                    "GPUs whose clocks are held back, per clock-event reason (NVML's; AMD's violation status and "
                    "firmware throttlers are reported as the same reasons).",
                    queries((f"sum by (reason) (accelpool_gpu_clock_throttle{{{GPU}}})", "{{reason}}")),
                    min=0,
                ),
            ),
        ),
        Row(
            "Checks and memory health",
            (
                Panel(
                    "Matmul TFLOPS",
                    "Measured dense matmul throughput per GPU and dtype.",
                    queries((f"accelpool_check_matmul_tflops{{{GPU}}}", "{{node}} GPU {{gpu}} {{dtype}}")),
                    unit="none",
                    min=0,
                ),
                Panel(
                    "Matmul efficiency",
                    "Measured / the catalog's dense peak per GPU and dtype; below the pool's "
                    "health.matmul.minEfficiency the GPU fails.",
                    queries((f"accelpool_check_matmul_efficiency_ratio{{{GPU}}}", "{{node}} GPU {{gpu}} {{dtype}}")),
                    unit="percentunit",
                    min=0,
                ),
                Panel(
                    "Memory bandwidth",
                    "Measured device-to-device copy bandwidth per GPU (bytes read + written).",
                    queries((f"accelpool_check_bandwidth_bytes_per_second{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="Bps",
                    min=0,
                ),
                Panel(
                    "Driver error events",
                    "The driver's error events per device since the agent started, by code: NVIDIA's critical "
                    "XIDs; on AMD amdsmi's events (1 VMFAULT, 2 THERMAL_THROTTLE, 3/4 GPU reset, 5 RING_HANG). "
                    "Neuron's execution errors and TPUs have none (their faults are in Check results).",
                    queries(
                        (
                            f"accelpool_gpu_xid_errors_total{{{GPU}}}",
                            "{{node}} {{vendor}} device {{gpu}} event {{xid}}",
                        )
                    ),
                    min=0,
                ),
                Panel(
                    "ECC errors and remapped rows",
                    "Volatile ECC errors by type, and memory rows remapped, per GPU.",
                    queries(
                        (
                            f'accelpool_gpu_ecc_errors_total{{{GPU}, scope="volatile"}}',
                            "{{node}} GPU {{gpu}} ECC {{error_type}}",
                        ),
                        (f"accelpool_gpu_remapped_rows{{{GPU}}}", "{{node}} GPU {{gpu}} remapped {{error_type}}"),
                    ),
                    min=0,
                ),
                Panel(
                    "PCIe link width",
                    "Lanes the PCIe link trained at, per GPU; below the maximum means a degraded link.",
                    queries(
                        (f"accelpool_gpu_pcie_link_width{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"max(accelpool_gpu_pcie_link_max_width{{{GPU}}})", "max"),
                    ),
                    min=0,
                ),
                Panel(
                    "Core utilization",
                    "Per core of a many-core device: each NeuronCore of an AWS Neuron device (neuron-monitor), the "
                    "TensorCores' share in use on a Google TPU chip (libtpu's tensorcore_util).",
                    queries(
                        (f"accelpool_gpu_core_utilization_ratio{{{GPU}}}", "{{node}} device {{gpu}} core {{core}}"),
                        (f"accelpool_gpu_tensorcore_utilization_ratio{{{GPU}}}", "{{node}} chip {{gpu}} TensorCores"),
                    ),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Agent collectors",
                    "Per-collector scrape duration of the agent, and how many collectors failed (no data).",
                    queries(
                        (
                            f"accelpool_agent_scrape_collector_duration_seconds{{{NODE}}}",
                            "{{node}} {{collector}}",
                        ),
                        (
                            f"sum by (node) (1 - accelpool_agent_scrape_collector_success{{{NODE}}})",
                            "{{node}} failing collectors",
                        ),
                    ),
                    unit="s",
                    min=0,
                ),
            ),
        ),
        Row(
            "Findings, links and power",
            (
                Panel(
                    "Recommended action",
                    "The strongest action of the node's CRITICAL findings, on the ladder none, drain, reset-gpu, "
                    "restart-os, service-required (the annotation accelpool.io/health lists the findings).",
                    queries((f"accelpool_node_recommended_action{{{NODE}}} == 1", "{{node}} {{action}}")),
                    kind="table",
                    width=12,
                    height=6,
                ),
                Panel(
                    "Findings by severity",
                    "Checks that did not simply pass, grouped over the node's GPUs, by severity.",
                    queries((f"sum by (severity) (accelpool_node_findings{{{NODE}}})", "{{severity}}")),
                    min=0,
                ),
                Panel(
                    "Peer links down",
                    "Peer links per device that are not active (NVLink; XGMI on AMD Instinct); one down while the "
                    "device's others are up fails it.",
                    queries(
                        (
                            f"accelpool_gpu_nvlink_links{{{GPU}}} - accelpool_gpu_nvlink_links_active{{{GPU}}}",
                            "{{node}} GPU {{gpu}}",
                        ),
                    ),
                    min=0,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "Peer link errors per minute",
                    "NVLink (XGMI on AMD) data-link errors per minute summed over each device's links, by counter; "
                    "the agent warns "
                    "at 1/min per link and fails at 8/min (replay, recovery) or 6000/min (CRC).",
                    queries(
                        (
                            f"60 * sum by (node, gpu, counter) "
                            f"(rate(accelpool_gpu_nvlink_errors_total{{{GPU}}}[$__rate_interval]))",
                            "{{node}} GPU {{gpu}} {{counter}}",
                        ),
                    ),
                    min=0,
                ),
                Panel(
                    "NVSwitch fabric",
                    "1 when the GPU completed its NVSwitch fabric registration (Hopper and later, with the fabric "
                    "manager); 0 fails the GPU.",
                    queries((f"accelpool_gpu_fabric_registered{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    min=0,
                    max=1,
                ),
                Panel(
                    "PCIe link generation",
                    "Current PCIe generation per GPU against its maximum; idle GPUs drop to gen1 to save power, "
                    "so only a loaded GPU below its maximum is degraded.",
                    queries(
                        (f"accelpool_gpu_pcie_link_generation{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"max(accelpool_gpu_pcie_link_max_generation{{{GPU}}})", "max"),
                    ),
                    min=0,
                ),
                Panel(
                    "Performance state",
                    "P-state per GPU (0 = P0, maximum performance); a loaded GPU above P2 is stuck in a "
                    "power-saving state.",
                    queries((f"accelpool_gpu_power_state{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    min=0,
                ),
                Panel(
                    "InfiniBand ports",
                    "Logical state per RDMA port: 4 ACTIVE; below 4 the port is down (Disabled ports excepted).",
                    queries((f"accelpool_ib_port_state{{{NODE}}}", "{{node}} {{device}}/{{port}}")),
                    min=0,
                ),
                Panel(
                    "InfiniBand errors per minute",
                    "Port error counters per minute (symbol errors, link recoveries and flaps, receive errors, "
                    "discards); the agent warns at the rates of infiniband-diags' error thresholds.",
                    queries(
                        (
                            f"60 * rate(accelpool_ib_port_errors_total{{{NODE}}}[$__rate_interval])",
                            "{{node}} {{device}}/{{port}} {{counter}}",
                        ),
                    ),
                    min=0,
                ),
            ),
        ),
    )
