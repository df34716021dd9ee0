"""Whether the cluster can take one GPU out of service: which DeviceTaintRule API to write, or why not. Pure.

DeviceTaintRule is served as `resource.k8s.io/v1` (on by default) from Kubernetes 1.37; on 1.36 only as
`v1beta2` behind the `DRADeviceTaintRules` gate and `--runtime-config=resource.k8s.io/v1beta2=true`, where
the recorded kube-scheduler v1.36.2 ignored rules unless started with the gate, and panicked at start with
it (`../shared/fidelity/kubernetes/dra.yaml`, scenario dra-scheduling): a rule there may not keep claims
off the GPU, so accelpool writes v1beta2 rules only when the operator is told to (`--device-taint-rules
v1beta2`). The versions served come from discovery (`accelpool.runtime.controller.dra`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import accelpool_api as api

Setting = Literal["auto", "v1beta2", "off"]
SETTINGS: tuple[str, ...] = ("auto", "v1beta2", "off")


@dataclass(frozen=True)
class RuleSupport:
    """The DeviceTaintRule API version to write (None: none, and `reason`/`message` say why)."""

    version: str | None
    reason: str
    message: str


def rule_support(served: frozenset[str], setting: Setting) -> RuleSupport:
    """From the `resource.k8s.io` versions that serve `devicetaintrules` and the operator's setting."""
    if setting == "off":
        return RuleSupport(
            None, "Disabled", "the operator runs with --device-taint-rules off: a bad GPU quarantines its node"
        )
    if "v1" in served:
        return RuleSupport("v1", "DeviceTaintRules", "a bad GPU is quarantined alone with a DeviceTaintRule")
    if "v1beta2" in served:
        if setting == "v1beta2":
            return RuleSupport(
                "v1beta2",
                "DeviceTaintRules",
                "a bad GPU is quarantined alone with a resource.k8s.io/v1beta2 DeviceTaintRule (opted in: "
                "kube-scheduler must run with the DRADeviceTaintRules gate to honour it)",
            )
        return RuleSupport(
            None,
            "OptInRequired",
            "the cluster serves DeviceTaintRule only as resource.k8s.io/v1beta2 (Kubernetes 1.36): a bad GPU "
            "quarantines its node unless the operator runs with --device-taint-rules v1beta2, which needs "
            "kube-scheduler and kube-controller-manager started with --feature-gates=DRADeviceTaintRules=true "
            "(kube-scheduler v1.36.2 ignores rules without it)",
        )
    return RuleSupport(
        None,
        "DeviceTaintRuleNotServed",
        "the cluster does not serve DeviceTaintRule (resource.k8s.io/v1 from Kubernetes 1.37): a bad GPU "
        "quarantines its node",
    )


def pool_scope(spec: api.ComputePoolSpec, support: RuleSupport) -> api.QuarantineScope:
    """How the pool quarantines a bad GPU, and why."""
    if spec.allocation != "DRA":
        return api.QuarantineScope(
            scope="Node",
            reason="DevicePlugin",
            message="NVIDIA's device plugin cannot withhold one GPU of a node: a bad GPU quarantines its node "
            "(allocation DRA quarantines the GPU alone where the cluster serves DeviceTaintRule)",
        )
    if spec.health.remediation == "none":
        return api.QuarantineScope(
            scope="Node", reason="RemediationNone", message="remediation none: bad GPUs are reported only"
        )
    if support.version is None:
        return api.QuarantineScope(scope="Node", reason=support.reason, message=support.message)
    return api.QuarantineScope(scope="GPU", reason=support.reason, message=support.message)
