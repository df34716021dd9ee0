"""*Accelerator Pools*, the fleet view, as rows of declared panels.

Per pool: members, ready, quarantined, in burn-in, GPUs pods can use and those that cannot serve
(by why), driver versions, utilization, memory, power, temperature, measured vs expected TFLOPS,
driver error events (XID, amdsmi) and ECC, the remediation ladder (nodes per step, drain evictions, hand-offs), and the
operator's own health.
"""

from __future__ import annotations

from accelpool.cli.dashboards.panels import DEVICES, POOL, Panel, Row, queries


def rows() -> tuple[Row, ...]:
    """The Accelerator Pools dashboard's rows, top to bottom."""
    return (
        Row(
            "Fleet",
            (
                Panel(
                    "Pools by phase",
                    "ComputePools per status.phase (Pending, Provisioning, Configuring, Ready, Degraded, Failed).",
                    queries(("sum by (phase) (accelpool_pools)", "{{phase}}")),
                    kind="stat",
                    width=8,
                    height=5,
                ),
                Panel(
                    "Pools",
                    "Every pool's current phase and accelerator.",
                    queries(
                        (
                            f"(accelpool_pool_phase{{{POOL}}} == 1) * on (pool) "
                            "group_left (accelerator, provisioner, mig_strategy, sharing) "
                            f"accelpool_pool_info{{{POOL}}}",
                            "",
                        ),
                    ),
                    kind="table",
                    width=8,
                    height=5,
                ),
                Panel(
                    "Quarantined nodes",
                    "Members the operator tainted or cordoned because their agent reported a fault.",
                    queries((f'sum(accelpool_pool_nodes{{{POOL}, state="quarantined"}})', "quarantined")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "Circuit breakers open",
                    "Pools where the operator refused a quarantine because health.maxUnavailable was reached.",
                    queries((f"sum(accelpool_pool_circuit_breaker_open{{{POOL}}})", "open")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "Unhealthy GPUs",
                    "GPUs failing at least one check, as their agents report them.",
                    queries((f"sum(accelpool_node_unhealthy_gpus{{{POOL}}})", "unhealthy")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "GPUs in pools",
                    "Devices pods can use now: on serving members, not quarantined nor in burn-in "
                    "(status.capacity.gpus).",
                    queries((f"sum(accelpool_pool_gpus{{{POOL}}})", "GPUs")),
                    kind="stat",
                    width=4,
                    height=5,
                ),
                Panel(
                    "Healthy nodes",
                    "Nodes whose agent reports AcceleratorHealthy=True, and nodes with a reporting agent.",
                    queries(
                        (f"sum(accelpool_node_healthy{{{POOL}}})", "healthy"),
                        (f"count(accelpool_node_healthy{{{POOL}}})", "with an agent"),
                    ),
                    kind="stat",
                    width=4,
                    height=5,
                ),
            ),
        ),
        Row(
            "Pool capacity",
            (
                Panel(
                    "Nodes per pool",
                    "Desired (spec.nodes), member, ready, quarantined and burn-in nodes of each pool.",
                    queries((f"accelpool_pool_nodes{{{POOL}}}", "{{pool}} {{state}}")),
                    min=0,
                ),
                Panel(
                    "GPUs per pool",
                    "Devices pods can use now on each pool's serving members (status.capacity.gpus).",
                    queries((f"accelpool_pool_gpus{{{POOL}}}", "{{pool}}")),
                    min=0,
                ),
                Panel(
                    "Measured vs expected TFLOPS",
                    "The pool's measured matmul TFLOPS (status.capacity.measuredTFLOPS, the policy dtype) against "
                    "the catalog's dense peak of the same GPUs: a gap means slow, throttled or missing GPUs.",
                    queries(
                        (f"accelpool_pool_measured_tflops{{{POOL}}}", "{{pool}} measured"),
                        (f"accelpool_pool_expected_tflops{{{POOL}}}", "{{pool}} expected (catalog peak)"),
                    ),
                    unit="none",
                    min=0,
                ),
                Panel(
                    "Matmul efficiency, worst GPU",
                    "Lowest measured / peak matmul throughput of any GPU in the pool, per dtype; the pool's "
                    "health.matmul.minEfficiency is the floor below which the GPU fails.",
                    queries(
                        (
                            f"min by (pool, dtype) (accelpool_check_matmul_efficiency_ratio{{{POOL}}})",
                            "{{pool}} {{dtype}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
                Panel(
                    "GPUs that cannot serve",
                    "Devices on members pods cannot use now, by why: quarantined, in burn-in (joined and not "
                    "yet passed a full check cycle), unschedulable (NotReady, or cordoned by someone else).",
                    queries((f"accelpool_pool_unavailable_gpus{{{POOL}}} > 0", "{{pool}} {{reason}}")),
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "Driver versions per pool",
                    "Distinct driver and CUDA versions the pool's agents report; more than 1 is a mismatch "
                    "(condition DriversConsistent names the nodes on the minority versions).",
                    queries((f"accelpool_pool_driver_versions{{{POOL}}}", "{{pool}}")),
                    min=0,
                    thresholds=((2, "orange"),),
                ),
            ),
        ),
        Row(
            "Utilization",
            (
                Panel(
                    "GPU utilization",
                    "Mean utilization of the pool's GPUs (fraction of time a kernel ran).",
                    queries((f"avg by (pool) (accelpool_gpu_utilization_ratio{{{DEVICES}}})", "{{pool}}")),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "GPU memory",
                    "Device memory in use across each pool, against the total.",
                    queries(
                        (f"sum by (pool) (accelpool_gpu_memory_used_bytes{{{DEVICES}}})", "{{pool}} used"),
                        (f"sum by (pool) (accelpool_gpu_memory_total_bytes{{{DEVICES}}})", "{{pool}} total"),
                    ),
                    unit="bytes",
                    min=0,
                ),
                Panel(
                    "Power",
                    "Total power draw of each pool's GPUs, against the sum of their power limits.",
                    queries(
                        (f"sum by (pool) (accelpool_gpu_power_watts{{{DEVICES}}})", "{{pool}} draw"),
                        (f"sum by (pool) (accelpool_gpu_power_limit_watts{{{DEVICES}}})", "{{pool}} limit"),
                    ),
                    unit="watt",
                    min=0,
                ),
                Panel(
                    "Temperature",
                    "Hottest GPU of each pool, and the lowest slowdown temperature among them (clocks drop there).",
                    queries(
                        (f"max by (pool) (accelpool_gpu_temperature_celsius{{{DEVICES}}})", "{{pool}} hottest"),
                        (
                            f"min by (pool) (accelpool_gpu_slowdown_temperature_celsius{{{DEVICES}}})",
                            "{{pool}} slowdown",
                        ),
                    ),
                    unit="celsius",
                ),
            ),
        ),
        Row(
            "Faults",
            (
                Panel(
                    "Driver error events",
                    "Error events the driver reported, per node and code: NVIDIA's critical XIDs (79: fallen off "
                    "the bus; 48, 94, 95: ECC; 119, 120: GSP), amdsmi's events on AMD (5: RING_HANG). The GPU "
                    "Node dashboard shows which device.",
                    queries(
                        (
                            "sum by (pool, node, vendor, xid) "
                            f"(increase(accelpool_gpu_xid_errors_total{{{DEVICES}}}[$__rate_interval]))",
                            "{{node}} {{vendor}} event {{xid}}",
                        ),
                    ),
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "ECC errors since the driver loaded",
                    "Volatile ECC error counts per node: single_bit were corrected, double_bit were not.",
                    queries(
                        (
                            "sum by (pool, node, error_type) "
                            f'(accelpool_gpu_ecc_errors_total{{{DEVICES}, scope="volatile"}})',
                            "{{node}} {{error_type}}",
                        ),
                    ),
                    min=0,
                ),
                Panel(
                    "Checks failing and warning",
                    "GPUs per check whose latest result fails (2) or warns (1).",
                    queries(
                        (f"count by (pool, check) (accelpool_check_status{{{POOL}}} == 2)", "{{pool}} {{check}} fail"),
                        (f"count by (pool, check) (accelpool_check_status{{{POOL}}} == 1)", "{{pool}} {{check}} warn"),
                    ),
                    min=0,
                ),
                Panel(
                    "Remediations",
                    "Quarantines and releases the operator applied, per pool.",
                    queries(
                        (
                            "sum by (pool, action) "
                            f"(increase(accelpool_remediations_total{{{POOL}}}[$__rate_interval]))",
                            "{{pool}} {{action}}",
                        ),
                    ),
                    min=0,
                ),
            ),
        ),
        Row(
            "Remediation ladder",
            (
                Panel(
                    "Nodes per ladder step",
                    "Quarantined members (all steps) and those draining, drained, or handed off to a break-fix "
                    "step (label accelpool.io/remediation-action), per pool (spec.health.drain, handOff).",
                    queries(
                        (
                            f'accelpool_pool_nodes{{{POOL}, state=~"quarantined|draining|drained|handed_off"}}',
                            "{{pool}} {{state}}",
                        ),
                    ),
                    min=0,
                ),
                Panel(
                    "Drain evictions",
                    "Evictions the drain sent, by result: evicted, blocked (refused by a PodDisruptionBudget, "
                    "retried every 10 s), failed (an API error).",
                    queries(
                        (
                            "sum by (pool, result) "
                            f"(increase(accelpool_drain_evictions_total{{{POOL}}}[$__rate_interval]))",
                            "{{pool}} {{result}}",
                        ),
                    ),
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "Handed off",
                    "Drained members waiting for a GPU reset, an OS restart or service (AccelPoolNodeHandedOff "
                    "fires after 30 minutes).",
                    queries((f'sum(accelpool_pool_nodes{{{POOL}, state="handed_off"}})', "handed off")),
                    kind="stat",
                    width=4,
                    height=8,
                    thresholds=((1, "orange"),),
                ),
            ),
        ),
        Row(
            "Operator and agents",
            (
                Panel(
                    "Reconcile passes",
                    "Reconcile passes per second by result (a pass plans every pool and writes the difference).",
                    queries(("sum by (result) (rate(accelpool_reconcile_total[$__rate_interval]))", "{{result}}")),
                    unit="ops",
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "Reconcile duration (p95)",
                    "95th percentile of a reconcile's wall time.",
                    queries(
                        (
                            "histogram_quantile(0.95, sum by (le) "
                            "(rate(accelpool_reconcile_duration_seconds_bucket[$__rate_interval])))",
                            "p95",
                        ),
                    ),
                    unit="s",
                    min=0,
                ),
                Panel(
                    "Pass time by stage",
                    "Seconds per second the reconcile passes spend in each stage (load, plan, write, drain, status, "
                    "events, record; status and events overlap): the stage a slow pass waits in.",
                    queries(
                        (
                            "sum by (stage) (rate(accelpool_reconcile_stage_seconds_total[$__rate_interval]))",
                            "{{stage}}",
                        ),
                    ),
                    unit="s",
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "Since the last successful pass",
                    "Seconds since a reconcile pass last succeeded; it keeps growing while every pass fails.",
                    queries(("time() - max(accelpool_reconcile_last_success_timestamp_seconds)", "seconds")),
                    unit="s",
                    kind="stat",
                    width=6,
                    height=8,
                    thresholds=((300, "orange"), (900, "red")),
                ),
                Panel(
                    "API writes",
                    "Kubernetes API writes of the controller per second, by verb and resource; zero at steady state.",
                    queries(
                        (
                            "sum by (verb, resource) (rate(accelpool_api_writes_total[$__rate_interval]))",
                            "{{verb}} {{resource}}",
                        ),
                    ),
                    unit="wps",
                    min=0,
                ),
                Panel(
                    "Agents up",
                    "Agent pods Prometheus scrapes successfully, of those it knows, per pool.",
                    queries(
                        (f'sum by (pool) (up{{job="accelpool-agent", {POOL}}})', "{{pool}} up"),
                        (f'count by (pool) (up{{job="accelpool-agent", {POOL}}})', "{{pool}} scraped"),
                    ),
                    min=0,
                ),
            ),
        ),
    )
