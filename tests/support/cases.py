"""ComputePool specs and the verdict each validation layer must reach — one table for every layer.

`layer` says which stage of the API server's admission rejects a case (and `accelpool validate`
reports the same stage, with the same words):
- "valid":    nobody: the CRD, the admission webhook, `accelpool validate` and the operator accept it.
- "decode":   strict field validation (kubectl's default): an unknown field.
- "schema":   the CRD's structural schema or its CEL rules.
- "webhook":  the admission webhook: rules that need the accelerator catalog, or the two-shape
              `accelerator` field that CEL cannot see. The operator reports the same problems in
              condition Valid=False for a pool stored before a rule existed (or with the webhook off).
`path` is the field path the error must name, `says` a part of its message.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from accelpool_api import crd
from accelpool_demo.apiserver.structural import apply_defaults

Layer = Literal["valid", "decode", "schema", "webhook"]


@dataclass(frozen=True)
class Case:
    id: str
    spec: dict[str, Any]
    layer: Layer
    path: str = ""
    says: str = ""


CASES: list[Case] = [
    # ---- valid
    Case("string-form", {"accelerator": "H100"}, "valid"),
    Case("string-with-count", {"accelerator": "H100:8", "nodes": 4}, "valid"),
    Case("alias-lowercase", {"accelerator": "a100-80gb:4"}, "valid"),
    Case("typed-form", {"accelerator": {"name": "H100", "memory": "80GB", "formFactor": "SXM", "count": 8}}, "valid"),
    Case("typed-nvl", {"accelerator": {"name": "H100", "memory": "94GB"}, "mig": {"profile": "3g.47gb"}}, "valid"),
    Case("mig-shorthand", {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}, "valid"),
    Case(
        "mig-mixed",
        {"accelerator": "H100:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        "valid",
    ),
    Case("mig-a100-4g3g", {"accelerator": "A100-40GB", "mig": {"profiles": ["4g.20gb", "3g.20gb"]}}, "valid"),
    Case("mig-h200", {"accelerator": "H200", "mig": {"profile": "1g.18gb"}}, "valid"),
    # the form factor picks the memory variant: {H100, NVL} is the 94 GB H100 NVL
    Case("typed-nvl-form-factor", {"accelerator": {"name": "H100", "formFactor": "NVL"}}, "valid"),
    Case(
        "typed-nvl-form-factor-mig",
        {"accelerator": {"name": "H100", "formFactor": "NVL", "count": 2}, "mig": {"profiles": ["3g.47gb"] * 2}},
        "valid",
    ),
    # A30: 4 compute and 4 memory slices per GPU
    Case("mig-a30-balanced", {"accelerator": "A30", "mig": {"profiles": ["2g.12gb", "1g.6gb", "1g.6gb"]}}, "valid"),
    Case("mig-a30-media", {"accelerator": "A30", "mig": {"profiles": ["2g.12gb+me", "2g.12gb"]}}, "valid"),
    Case("mig-a30-whole", {"accelerator": "nvidia-a30", "mig": {"profile": "4g.24gb"}}, "valid"),
    # GH200 offers +me (NVIDIA's default mig-parted config: all-1g.12gb.me, all-1g.18gb.me)
    Case("mig-gh200-media", {"accelerator": "GH200", "mig": {"profile": "1g.12gb+me"}}, "valid"),
    Case(
        "mig-gh200-144gb-media",
        {"accelerator": "GH200-144GB", "mig": {"profiles": ["1g.18gb+me", "3g.72gb", "2g.36gb"]}},
        "valid",
    ),
    Case("time-slicing", {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}}, "valid"),
    Case(
        "time-slicing-fail-requests",
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4, "failRequestsGreaterThanOne": True}}},
        "valid",
    ),
    Case("mps", {"accelerator": "T4", "sharing": {"mps": {"replicas": 2}}}, "valid"),
    Case("mps-48-clients", {"accelerator": "H100", "sharing": {"mps": {"replicas": 48}}}, "valid"),
    Case("mps-v100-16-clients", {"accelerator": "V100", "sharing": {"mps": {"replicas": 16}}}, "valid"),
    Case("dra", {"accelerator": "H100:8", "allocation": "DRA", "health": {"gpuTaintEffect": "NoExecute"}}, "valid"),
    Case(
        "dra-nvlink-compute-domain",
        {
            "accelerator": "B200:8",
            "allocation": "DRA",
            "nvlink": {"sameClique": True, "computeDomain": {"namespace": "team-a"}},
        },
        "valid",
    ),
    Case(
        "nvlink-compute-domain-without-dra",
        {"accelerator": "H100:8", "nvlink": {"computeDomain": {"namespace": "team-a"}}},
        "schema",
        "spec.nvlink",
        "nvlink.computeDomain needs allocation DRA",
    ),
    Case("dra-unknown-mode", {"accelerator": "H100", "allocation": "Dra"}, "schema", "spec.allocation", "Unsupported"),
    Case(
        "dra-not-nvidia",
        {"accelerator": "MI300X:8", "allocation": "DRA"},
        "webhook",
        "spec.allocation",
        "allocation DRA is for NVIDIA GPUs",
    ),
    Case(
        "karpenter-range",
        {"accelerator": "H200:8", "nodes": 0, "maxNodes": 4, "provisioner": {"type": "karpenter"}},
        "valid",
    ),
    Case("tpu", {"accelerator": "TPU-v5p:4", "nodeSelector": {"topology.kubernetes.io/zone": "us-east5-a"}}, "valid"),
    Case("trainium2", {"accelerator": "Trainium2:16", "health": {"remediation": "cordon"}}, "valid"),
    Case(
        "health-policy",
        {
            "accelerator": "MI300X",
            "health": {"interval": "1h30m", "matmul": {"dtype": "fp16", "minEfficiency": 0.7}, "maxUnavailable": 2},
        },
        "valid",
    ),
    Case(
        "interval-bounds",
        {"accelerator": "H100", "health": {"interval": "1m", "holdDown": "168h", "matmul": {"minEfficiency": 1}}},
        "valid",
    ),
    Case("interval-week", {"accelerator": "H100", "health": {"interval": "168h", "holdDown": "10s"}}, "valid"),
    Case("zero-nodes", {"accelerator": "L4", "nodes": 0}, "valid"),
    Case(
        "remediation-ladder",
        {
            "accelerator": "H100",
            "health": {
                "remediation": "cordon",
                "drain": {"enabled": True, "gracePeriod": "2m", "timeout": "1h"},
                "handOff": {"enabled": True},
            },
        },
        "valid",
    ),
    Case("drain-off-with-none", {"accelerator": "H100", "health": {"remediation": "none", "drain": {}}}, "valid"),
    # ---- rejected by the CRD itself (schema or CEL), and by the models
    Case("missing-accelerator", {"nodes": 2}, "schema", "spec.accelerator", "Required value"),
    Case("unknown-field", {"accelerator": "H100", "gpus": 8}, "decode", "spec.gpus", 'unknown field "spec.gpus"'),
    Case(
        "mig-and-sharing",
        {"accelerator": "A100", "mig": {"profile": "1g.5gb"}, "sharing": {"mps": {"replicas": 2}}},
        "schema",
        "spec",
        "mutually exclusive",
    ),
    Case(
        "mig-neither-form", {"accelerator": "A100", "mig": {"strategy": "mixed"}}, "schema", "spec.mig", "exactly one"
    ),
    Case(
        "mig-both-forms",
        {"accelerator": "A100", "mig": {"profile": "1g.5gb", "profiles": ["1g.5gb"]}},
        "schema",
        "spec.mig",
        "exactly one",
    ),
    Case(
        "mig-single-mixed",
        {"accelerator": "A100", "mig": {"profiles": ["4g.20gb", "3g.20gb"], "strategy": "single"}},
        "schema",
        "spec.mig.strategy",
        "single MIG strategy",
    ),
    Case(
        "mig-bad-strategy",
        {"accelerator": "A100", "mig": {"profile": "1g.5gb", "strategy": "all"}},
        "schema",
        "spec.mig.strategy",
        'supported values: "single", "mixed"',
    ),
    Case(
        "mig-garbage-profile",
        {"accelerator": "A100", "mig": {"profile": "big"}},
        "schema",
        "spec.mig.profile",
        "should match",
    ),
    Case(
        "mig-too-many-profiles",
        {"accelerator": "A100", "mig": {"profiles": ["1g.5gb"] * 8}},
        "schema",
        "spec.mig.profiles",
        "at most 7",
    ),
    Case(
        "sharing-one-replica",
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 1}}},
        "schema",
        "spec.sharing.timeSlicing.replicas",
        "greater than or equal to 2",
    ),
    Case("sharing-empty", {"accelerator": "L4", "sharing": {}}, "schema", "spec.sharing", "exactly one"),
    # CUDA MPS serves at most 48 clients per GPU; NVIDIA's device plugin refuses more replicas
    Case(
        "mps-over-48-clients",
        {"accelerator": "H100", "sharing": {"mps": {"replicas": 49}}},
        "schema",
        "spec.sharing.mps.replicas",
        "less than or equal to 48",
    ),
    # under MPS failRequestsGreaterThanOne defaults to true as NVIDIA's does; false is honoured since v0.20.0
    Case(
        "mps-fail-requests",
        {"accelerator": "H100", "sharing": {"mps": {"replicas": 2, "failRequestsGreaterThanOne": False}}},
        "valid",
    ),
    Case(
        "mps-fail-requests-string",
        {"accelerator": "H100", "sharing": {"mps": {"replicas": 2, "failRequestsGreaterThanOne": "no"}}},
        "schema",
        "spec.sharing.mps.failRequestsGreaterThanOne",
        "boolean",
    ),
    Case(
        "time-slicing-fail-requests-string",
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 2, "failRequestsGreaterThanOne": "yes"}}},
        "schema",
        "spec.sharing.timeSlicing.failRequestsGreaterThanOne",
        "boolean",
    ),
    Case(
        "sharing-both",
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}, "timeSlicing": {"replicas": 2}}},
        "schema",
        "spec.sharing",
        "exactly one",
    ),
    Case(
        "bad-remediation",
        {"accelerator": "H100", "health": {"remediation": "drain"}},
        "schema",
        "spec.health.remediation",
        'supported values: "taint", "cordon", "none"',
    ),
    Case(
        "bad-interval",
        {"accelerator": "H100", "health": {"interval": "15 minutes"}},
        "schema",
        "spec.health.interval",
        "should match",
    ),
    Case(
        "efficiency-above-one",
        {"accelerator": "H100", "health": {"matmul": {"minEfficiency": 1.5}}},
        "schema",
        "spec.health.matmul.minEfficiency",
        "less than or equal to 1",
    ),
    Case(
        "bad-dtype",
        {"accelerator": "H100", "health": {"matmul": {"dtype": "int8"}}},
        "schema",
        "spec.health.matmul.dtype",
        '"bf16"',
    ),
    Case(
        "negative-max-unavailable",
        {"accelerator": "H100", "health": {"maxUnavailable": -1}},
        "schema",
        "spec.health.maxUnavailable",
        "maxUnavailable",
    ),
    Case(
        "percent-over-100",
        {"accelerator": "H100", "health": {"maxUnavailable": "150%"}},
        "schema",
        "spec.health.maxUnavailable",
        "percentage",
    ),
    Case(
        "bad-provisioner",
        {"accelerator": "H100", "provisioner": {"type": "cluster-autoscaler"}},
        "schema",
        "spec.provisioner.type",
        'supported values: "static", "karpenter"',
    ),
    Case("dedicated-not-bool", {"accelerator": "H100", "dedicated": "maybe"}, "schema", "spec.dedicated", "boolean"),
    # strings where the API server wants numbers or booleans: no lax coercion anywhere
    Case("dedicated-yes-string", {"accelerator": "H100", "dedicated": "yes"}, "schema", "spec.dedicated", "boolean"),
    # ---- kueue: names Kueue requires of a ResourceFlavor and a ClusterQueue (DNS-1123 subdomains)
    Case("kueue-enabled", {"accelerator": "H100:8", "kueue": {"enabled": True, "clusterQueue": "research"}}, "valid"),
    Case(
        "kueue-flavor-not-dns",
        {"accelerator": "H100:8", "kueue": {"enabled": True, "resourceFlavor": "H100_Flavor"}},
        "schema",
        "spec.kueue.resourceFlavor",
        "should match",
    ),
    Case(
        "kueue-queue-too-long",
        {"accelerator": "H100:8", "kueue": {"enabled": True, "clusterQueue": "q" * 254}},
        "schema",
        "spec.kueue.clusterQueue",
        "may not be more than 253 bytes",
    ),
    Case(
        "kueue-enabled-string",
        {"accelerator": "H100", "kueue": {"enabled": "yes"}},
        "schema",
        "spec.kueue.enabled",
        "boolean",
    ),
    Case(
        "kueue-unknown-field",
        {"accelerator": "H100", "kueue": {"queue": "q"}},
        "decode",
        "spec.kueue.queue",
        'unknown field "spec.kueue.queue"',
    ),
    Case(
        "max-unavailable-number-string",
        {"accelerator": "H100", "health": {"maxUnavailable": "5"}},
        "schema",
        "spec.health.maxUnavailable",
        "percentage",
    ),
    # int-or-string given another type: the API server's four type errors, not the rule's message
    Case(
        "max-unavailable-a-float",
        {"accelerator": "H100", "health": {"maxUnavailable": 1.5}},
        "schema",
        "spec.health.maxUnavailable",
        'must be of type integer,string: "number"',
    ),
    Case(
        "max-unavailable-a-bool",
        {"accelerator": "H100", "health": {"maxUnavailable": True}},
        "schema",
        "spec.health.maxUnavailable",
        'must be of type integer,string: "boolean"',
    ),
    Case(
        "max-unavailable-a-list",
        {"accelerator": "H100", "health": {"maxUnavailable": [1]}},
        "schema",
        "spec.health.maxUnavailable",
        'must be of type integer,string: "array"',
    ),
    Case(
        "efficiency-string",
        {"accelerator": "H100", "health": {"matmul": {"minEfficiency": "0.5"}}},
        "schema",
        "spec.health.matmul.minEfficiency",
        "number",
    ),
    Case(
        "replicas-string",
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": "4"}}},
        "schema",
        "spec.sharing.timeSlicing.replicas",
        "integer",
    ),
    Case(
        "typed-count-string",
        {"accelerator": {"name": "H100", "count": "8"}},
        "webhook",
        "spec.accelerator.count",
        "integer",
    ),
    # durations the agent and the planner can live with
    Case(
        "interval-zero",
        {"accelerator": "H100", "health": {"interval": "0s"}},
        "schema",
        "spec.health.interval",
        "between 1m and 168h",
    ),
    Case(
        "interval-too-long",
        {"accelerator": "H100", "health": {"interval": "169h"}},
        "schema",
        "spec.health.interval",
        "between 1m and 168h",
    ),
    # four parts of 99999h: within what Go's time.ParseDuration (CEL's duration()) can hold
    Case(
        "interval-largest-parts",
        {"accelerator": "H100", "health": {"interval": "99999h99999h99999h99999h"}},
        "schema",
        "spec.health.interval",
        "between 1m and 168h",
    ),
    Case(
        "interval-overflows",
        {"accelerator": "H100", "health": {"interval": "9" * 30 + "h"}},
        "schema",
        "spec.health.interval",
        "should match",
    ),
    Case(
        "interval-320-digits",
        {"accelerator": "H100", "health": {"interval": "9" * 320 + "s"}},
        "schema",
        "spec.health.interval",
        "may not be more than 32 bytes",
    ),
    Case(
        "drain-without-quarantine",
        {"accelerator": "H100", "health": {"remediation": "none", "drain": {"enabled": True}}},
        "schema",
        "spec.health.drain",
        "drain needs remediation taint or cordon",
    ),
    Case(
        "hand-off-without-drain",
        {"accelerator": "H100", "health": {"handOff": {"enabled": True}}},
        "schema",
        "spec.health.handOff",
        "handOff needs drain enabled",
    ),
    Case(
        "drain-timeout-too-long",
        {"accelerator": "H100", "health": {"drain": {"enabled": True, "timeout": "200h"}}},
        "schema",
        "spec.health.drain.timeout",
        "at most 168h",
    ),
    Case(
        "grace-period-too-long",
        {"accelerator": "H100", "health": {"drain": {"enabled": True, "gracePeriod": "25h"}}},
        "schema",
        "spec.health.drain.gracePeriod",
        "at most 24h",
    ),
    Case(
        "hold-down-too-long",
        {"accelerator": "H100", "health": {"holdDown": "200h"}},
        "schema",
        "spec.health.holdDown",
        "holdDown must be from 10s to 168h, not 200h",
    ),
    Case(
        "hold-down-zero",
        {"accelerator": "H100", "health": {"holdDown": "0s"}},
        "schema",
        "spec.health.holdDown",
        "holdDown must be from 10s to 168h, not 0s (a shorter hold-down releases a quarantined node",
    ),
    Case(
        "hold-down-under-the-floor",
        {"accelerator": "H100", "health": {"holdDown": "9s999ms"}},
        "schema",
        "spec.health.holdDown",
        "holdDown must be from 10s to 168h, not 9s999ms",
    ),
    Case(
        "selector-not-strings",
        {"accelerator": "H100", "nodeSelector": {"zone": 1}},
        "schema",
        "spec.nodeSelector.zone",
        "must be of type string",
    ),
    # ---- need the catalog: admitted by the API server, rejected by models, CLI and operator
    Case("unknown-accelerator", {"accelerator": "H1000:8"}, "webhook", "spec.accelerator", "did you mean H100-80GB"),
    Case(
        "mig-profile-not-offered",
        {"accelerator": "H100:8", "mig": {"profile": "1g.5gb"}},
        "webhook",
        "spec.mig.profile",
        "not offered by H100-80GB; valid: 1g.10gb",
    ),
    Case(
        "mig-on-l4", {"accelerator": "L4", "mig": {"profile": "1g.10gb"}}, "webhook", "spec.mig", "does not support MIG"
    ),
    Case(
        "mig-on-mi300x",
        {"accelerator": "MI300X", "mig": {"profile": "1g.10gb"}},
        "webhook",
        "spec.mig",
        "does not support MIG",
    ),
    Case(
        "mig-over-max",
        {"accelerator": "H100", "mig": {"profiles": ["3g.40gb"] * 3}},
        "webhook",
        "spec.mig.profiles",
        "at most 2 x 3g.40gb",
    ),
    Case(
        "mig-compute-overflow",
        {"accelerator": "H100", "mig": {"profiles": ["4g.40gb", "4g.40gb"]}},
        "webhook",
        "spec.mig.profiles",
        "needs 8 of 7 compute",
    ),
    Case(
        "mig-memory-overflow",
        {"accelerator": "A100-40GB", "mig": {"profiles": ["3g.20gb", "3g.20gb", "1g.5gb"]}},
        "webhook",
        "spec.mig.profiles",
        "9 of 8 memory",
    ),
    Case(
        "mig-a30-compute-overflow",
        {"accelerator": "A30", "mig": {"profiles": ["4g.24gb", "1g.6gb"]}},
        "webhook",
        "spec.mig.profiles",
        "layout does not fit one A30-24GB: needs 5 of 4 compute and 5 of 4 memory slices",
    ),
    Case(
        "mig-a30-seven-slice-profile",
        {"accelerator": "A30", "mig": {"profile": "3g.20gb"}},
        "webhook",
        "spec.mig.profile",
        "not offered by A30-24GB; valid: 1g.6gb, 1g.6gb+me",
    ),
    Case(
        "mps-v100-over-16-clients",
        {"accelerator": "V100", "sharing": {"mps": {"replicas": 17}}},
        "webhook",
        "spec.sharing.mps.replicas",
        "compute capability 7.0) serves at most 16 clients",
    ),
    Case(
        "typed-nvl-with-80gb",
        {"accelerator": {"name": "H100", "memory": "80GB", "formFactor": "NVL"}},
        "webhook",
        "spec.accelerator.formFactor",
        "H100 80GB comes as PCIe, SXM, not NVL",
    ),
    Case(
        "mig-nvl-name-on-sxm",
        {"accelerator": "H100", "mig": {"profile": "3g.47gb"}},
        "webhook",
        "spec.mig.profile",
        "not offered",
    ),
    Case(
        "memory-variant",
        {"accelerator": {"name": "H100", "memory": "40GB"}},
        "webhook",
        "spec.accelerator.memory",
        "80GB, 94GB",
    ),
    Case(
        "form-factor-variant",
        {"accelerator": {"name": "L4", "formFactor": "SXM"}},
        "webhook",
        "spec.accelerator.formFactor",
        "PCIe",
    ),
    Case(
        "sharing-on-tpu",
        {"accelerator": "TPU-v5e", "sharing": {"timeSlicing": {"replicas": 2}}},
        "webhook",
        "spec.sharing.timeSlicing",
        "NVIDIA",
    ),
    Case(
        "karpenter-for-tpu",
        {"accelerator": "TPU-v6e", "nodes": 1, "maxNodes": 2, "provisioner": {"type": "karpenter"}},
        "webhook",
        "spec.provisioner.type",
        "Karpenter",
    ),
    Case(
        "reserved-selector",
        {"accelerator": "H100", "nodeSelector": {"accelpool.io/pool": "x"}},
        "webhook",
        "spec.nodeSelector[accelpool.io/pool]",
        "set by the operator",
    ),
    # ---- two-shape fields: not visible to CEL
    Case("accelerator-zero-count", {"accelerator": "H100:0"}, "webhook", "spec.accelerator", "NAME[:COUNT]"),
    Case("accelerator-list", {"accelerator": ["H100"]}, "webhook", "spec.accelerator", "NAME[:COUNT]"),
    Case(
        "accelerator-typed-unknown-key",
        {"accelerator": {"name": "H100", "gpus": 8}},
        "webhook",
        "spec.accelerator.gpus",
        "unknown field",
    ),
    # ---- nodes: an integer (the scale subresource reads it), maxNodes for karpenter pools
    Case("nodes-string", {"accelerator": "H100", "nodes": "four"}, "schema", "spec.nodes", "must be of type integer"),
    Case("nodes-string-scale", {"accelerator": "H100", "nodes": "four"}, "schema", ".spec.nodes", "accessor error"),
    Case("nodes-negative", {"accelerator": "H100", "nodes": -2}, "schema", "spec.nodes", "greater than or equal to 0"),
    Case("nodes-negative-scale", {"accelerator": "H100", "nodes": -2}, "schema", ".spec.nodes", "non-negative"),
    Case(
        "nodes-too-many", {"accelerator": "H100", "nodes": 10001}, "schema", "spec.nodes", "less than or equal to 10000"
    ),
    Case(
        "nodes-old-range-shape",
        {"accelerator": "H100", "nodes": {"min": 1, "max": 3}, "provisioner": {"type": "karpenter"}},
        "schema",
        ".spec.nodes",
        "map[max:3 min:1] is of the type map[string]interface {}, expected int64",
    ),
    Case(
        "max-nodes-below-nodes",
        {"accelerator": "H100", "nodes": 3, "maxNodes": 1, "provisioner": {"type": "karpenter"}},
        "schema",
        "spec.maxNodes",
        "at least nodes",
    ),
    Case(
        "max-nodes-without-karpenter",
        {"accelerator": "H100", "nodes": 1, "maxNodes": 3},
        "schema",
        "spec.maxNodes",
        "needs provisioner type karpenter",
    ),
    Case(
        "max-nodes-with-static-provisioner",
        {"accelerator": "H100", "maxNodes": 3, "provisioner": {"type": "static"}},
        "schema",
        "spec.maxNodes",
        "needs provisioner type karpenter",
    ),
    Case(
        "max-nodes-zero",
        {"accelerator": "H100", "maxNodes": 0},
        "schema",
        "spec.maxNodes",
        "greater than or equal to 1",
    ),
    Case(
        "typed-count-zero",
        {"accelerator": {"name": "H100", "count": 0}},
        "webhook",
        "spec.accelerator.count",
        "greater than or equal to 1",
    ),
    Case("typed-name-missing", {"accelerator": {"count": 8}}, "webhook", "spec.accelerator.name", "Required value"),
    Case("accelerator-number", {"accelerator": 100}, "webhook", "spec.accelerator", "NAME[:COUNT]"),
]


def defaulted(spec: dict[str, Any]) -> dict[str, Any]:
    """A pool's spec as the API server stores it: with the CRD's defaults filled in."""
    schema = crd.custom_resource_definition()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    filled = copy.deepcopy(spec)
    apply_defaults(schema["properties"]["spec"], filled)
    return filled
