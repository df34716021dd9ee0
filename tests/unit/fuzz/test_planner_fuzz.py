"""Fuzz tier: any spec the validators admit and any node the API server could hold is planned, never crashes.

Hypothesis generates ComputePool specs (valid and hostile: odd durations, huge numbers, wrong
types, every catalog name and aliases, MIG and sharing mixes) and node snapshots in the shapes a
real API server returns (labels and capacities with any string values, foreign taints, health
conditions and annotations of any content). The properties:

- `validate_spec` never raises: it returns a model or problems naming a field;
- every admitted spec renders its agent DaemonSet (and NodePool) without raising;
- `plan` over admitted pools and arbitrary nodes never raises, sets no pool aside (a pool set
  aside would mean a planning bug the isolation is hiding), and every status it computes is a
  valid, serialisable ComputePoolStatus with numbers inside int64.

The budget is fixed and the search derandomized, so CI runs the same examples every time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accelpool_api as api
from accelpool.decide import render
from accelpool.decide.planning import ConfigState, PlannerOptions, PoolInput, plan
from accelpool.model.nodes import NodeView
from accelpool_api import conventions
from accelpool_api.validation import validate_spec
from accelpool_core import catalog

NOW = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
INT64 = 2**63 - 1

names = st.sampled_from(
    [a.name for a in catalog.ACCELERATORS] + ["h100", "a100-80gb", "nvidia-h100-80gb", "H1000", "", "gpu"]
)
numbers = st.one_of(
    st.integers(min_value=-5, max_value=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
)
durations = st.one_of(
    st.sampled_from(["15m", "0s", "1m", "168h", "169h", "59s", "1h30m", "0.5ms", "9" * 40 + "h", "1e3s"]),
    st.from_regex(r"\A[0-9]{1,25}(ms|s|m|h)\Z"),
    st.text(max_size=6),
    numbers,
)
profiles = st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb", "1g.10gb+me", "2g.20gb", "1g.5gb", "4g.20gb", "x"])

accelerators = st.one_of(
    st.builds(lambda n, c: f"{n}:{c}" if c is not None else n, names, st.one_of(st.none(), st.integers(-1, 80))),
    st.fixed_dictionaries(
        {"name": names},
        optional={
            "memory": st.sampled_from(["80GB", "40GB", "94GB", "141 GB", "1GB", "x"]),
            "formFactor": st.sampled_from(["SXM", "PCIe", "NVL", "OAM", "sxm"]),
            "count": numbers,
        },
    ),
    numbers,
)
specs = st.fixed_dictionaries(
    {"accelerator": accelerators},
    optional={
        "nodes": numbers,
        "maxNodes": numbers,
        "mig": st.one_of(
            st.fixed_dictionaries({"profile": profiles}, optional={"strategy": st.sampled_from(["single", "mixed"])}),
            st.fixed_dictionaries(
                {"profiles": st.lists(profiles, max_size=8)}, optional={"strategy": st.sampled_from(["single", "x"])}
            ),
        ),
        "sharing": st.one_of(
            st.fixed_dictionaries({"timeSlicing": st.fixed_dictionaries({"replicas": numbers})}),
            st.fixed_dictionaries({"mps": st.fixed_dictionaries({"replicas": numbers})}),
        ),
        "nodeSelector": st.dictionaries(st.sampled_from(["zone", "accelpool.io/pool", "a/b"]), st.text(max_size=5)),
        "dedicated": st.one_of(st.booleans(), numbers),
        "provisioner": st.fixed_dictionaries({"type": st.sampled_from(["static", "karpenter", "other"])}),
        "health": st.fixed_dictionaries(
            {},
            optional={
                "interval": durations,
                "holdDown": durations,
                "remediation": st.sampled_from(["taint", "cordon", "none", "drain"]),
                "maxUnavailable": st.one_of(numbers, st.sampled_from(["0%", "50%", "100%", "150%", "5"])),
                "matmul": st.fixed_dictionaries(
                    {}, optional={"dtype": st.sampled_from(["bf16", "fp32", "int8"]), "minEfficiency": numbers}
                ),
            },
        ),
    },
)

label_values = st.one_of(st.text(max_size=12), st.from_regex(r"\A[0-9]{1,30}\Z"), st.sampled_from(["8", "0", "-1"]))
products = st.sampled_from(
    [p for a in catalog.ACCELERATORS for p in a.detection.gfd_products]
    + ["NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "NVIDIA-A100-SXM4-40GB-SHARED", "NVIDIA-H100-MIG-INVALID", "Tesla"]
)
taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(
                ["nvidia.com/gpu", "dedicated", "node-role.kubernetes.io/control-plane", "accelpool.io/quarantined"]
            ),
            "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
        },
        optional={"value": st.text(max_size=8)},
    ),
    max_size=3,
)
times = st.one_of(
    st.none(), st.sampled_from(["2026-11-02T11:59:00Z", "2026-01-01T00:00:00Z", "not a time", "2999-01-01T00:00:00Z"])
)
conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["Ready", conventions.HEALTH_CONDITION]),
            "status": st.sampled_from(["True", "False", "Unknown", "x"]),
        },
        optional={
            "reason": st.text(max_size=20),
            "message": st.text(max_size=40),
            "lastTransitionTime": times,
            "lastHeartbeatTime": times,
        },
    ),
    max_size=3,
)
node_annotations = st.dictionaries(
    st.sampled_from(
        [conventions.HEALTH_ANNOTATION, conventions.JOINED_ANNOTATION, conventions.PRIOR_LABELS_ANNOTATION]
    ),
    st.one_of(
        st.text(max_size=30),
        st.builds(
            lambda s, r, g, t: json.dumps({"status": s, "reason": r, "gpus": g, "tflops": t}),
            st.sampled_from(["Healthy", "Unhealthy", "Unknown", "Bad"]),
            st.text(max_size=10),
            numbers,
            numbers,
        ),
    ),
)


@st.composite
def node_bodies(draw: st.DrawFn, index: int = 0) -> dict[str, Any]:
    labels: dict[str, str] = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "nvidia.com/gpu.count",
                    "nvidia.com/gpu.memory",
                    "karpenter.k8s.aws/instance-gpu-count",
                    "node.kubernetes.io/instance-type",
                    "cloud.google.com/gke-accelerator",
                    conventions.MIG_CONFIG_LABEL,
                    conventions.MIG_CONFIG_STATE_LABEL,
                    conventions.DEVICE_PLUGIN_CONFIG_LABEL,
                    "node-role.kubernetes.io/control-plane",
                ]
            ),
            label_values,
            max_size=5,
        )
    )
    if draw(st.booleans()):
        labels["nvidia.com/gpu.product"] = draw(products)
    if draw(st.booleans()):
        labels[conventions.POOL_LABEL] = draw(st.sampled_from(["p0", "p1", "gone"]))
    capacity = draw(
        st.dictionaries(st.sampled_from(["nvidia.com/gpu", "amd.com/gpu", "cpu"]), label_values, max_size=2)
    )
    return {
        "metadata": {
            "name": f"n{index}",
            "uid": f"uid-{index}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": draw(node_annotations),
            "creationTimestamp": draw(times),
        },
        "spec": {"taints": draw(taints), "unschedulable": draw(st.booleans())},
        "status": {"capacity": capacity, "allocatable": capacity, "conditions": draw(conditions)},
    }


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=0, max_value=6))
    return [draw(node_bodies(i)) for i in range(count)]


@FUZZ
@given(specs)
def test_validation_never_raises_and_every_admitted_spec_renders(spec: dict[str, Any]) -> None:
    checked, problems = validate_spec(spec)
    if checked is None:
        assert problems and all(str(p).startswith(("spec", ".spec", "<nil>: ")) for p in problems)
        return
    daemonset = render.daemonset("p0", "uid-p0", checked, render.AgentRendering())
    json.dumps(daemonset)
    if checked.provisioner.type == "karpenter":
        json.dumps(render.nodepool("p0", "uid-p0", checked))


@FUZZ
@given(st.lists(specs, min_size=1, max_size=3), clusters())
def test_any_admitted_pools_and_any_nodes_are_planned_without_setting_a_pool_aside(
    raw_specs: list[dict[str, Any]], bodies: list[dict[str, Any]]
) -> None:
    pools = []
    for index, raw in enumerate(raw_specs):
        checked, problems = validate_spec(raw)
        pools.append(
            PoolInput(
                name=f"p{index}",
                spec=checked,
                problems=tuple(str(p) for p in problems),
                uid=f"uid-p{index}",
                generation=1,
            )
        )
    nodes = [NodeView.from_body(body) for body in bodies]
    result = plan(pools, nodes, ConfigState(), PlannerOptions(now=NOW))
    assert dict(result.unplannable) == {}
    for pool in pools:
        planned = result.pool(pool.name)
        assert planned is not None and planned.status is not None
        status = api.ComputePoolStatus.model_validate(planned.status.model_dump(by_alias=True))
        assert 0 <= status.capacity.gpus <= INT64 and 0 <= status.capacity.memory_gib <= INT64
        assert all(0 <= v <= INT64 for v in status.capacity.resources.values())
        valid = next(c for c in status.conditions if c.type == "Valid")
        assert (valid.status == "True") == pool.valid
