"""The Kubernetes objects accelpool creates for a pool: the agent DaemonSet and the Karpenter NodePool.

- `daemonset(...)`: one per pool, in the agent namespace, owned by the pool (ownerReference),
  scheduled only on the pool's members (nodeSelector `accelpool.io/pool=<pool>`), tolerating
  the pool taint, the quarantine and burn-in taints (the agent must keep checking a quarantined
  node to release it, and check a joining node to end its burn-in), the accelerator's
  resource taint (GKE's `nvidia.com/gpu=present`) and the other controllers' taints found on
  members. Its container runs
  `accelpool-agent run --node-name $(NODE_NAME) --listen 0.0.0.0:9402 --backend <backend>` (the
  pool's `spec.health.backend`, else the operator's one `backend`, else its backend for the
  accelerator's catalog vendor: `agent_backend`) in the image that carries that vendor's
  libraries (`agent_image`), with the pool's `AgentConfig` as JSON in `ACCELPOOL_AGENT_CONFIG`
  (health policy and the catalog's expected peaks), probed for liveness and readiness on its
  metrics port. NVML access comes from the NVIDIA container runtime (`runtimeClassName`,
  `NVIDIA_VISIBLE_DEVICES=all`) or, with `privileged`, from the host's /dev; the `amdsmi`, `neuron`
  and `tpu` backends open the host's device files (/dev/kfd and /dev/dri, /dev/neuron*, /dev/vfio or
  /dev/accel*) from a privileged container running as root with the host's /dev mounted, as the
  vendors' own DaemonSets do (`agent_access`).
- `nodepool(...)`: a `karpenter.sh/v1` NodePool for `provisioner: karpenter` pools; with burn-in,
  its nodes start with the burn-in taint (`startupTaints`: "expected to be removed automatically
  ... typically by a DaemonSet that tolerates the taint", Karpenter's `pkg/apis/v1/nodeclaim.go`,
  and pods need not tolerate them for Karpenter to provision nodes for them). Karpenter hashes
  the whole `spec.template` (`NodePool.Hash`, `pkg/apis/v1/nodepool.go`; only `requirements` carry
  `hash:"ignore"`, and are judged by their own drift check instead) and marks every NodeClaim whose
  hash differs `Drifted/NodePoolDrifted` (`pkg/controllers/nodeclaim/disruption/drift.go`
  `areStaticFieldsDrifted`), which its disruption controller then replaces. So the template holds
  only what never changes with an edit of the pool's layout: the pool label, which makes a launched
  node a member, but not the NVIDIA config labels, whose values are named by the config's content
  (a replicas or MIG edit would replace every node of the pool). accelpool labels the members
  Karpenter launched as it labels static ones (`accelpool.decide.planning.changes`), and relabels them in
  place after an edit; Karpenter sets a node's labels from its NodeClaim only when it registers
  (`pkg/controllers/nodeclaim/lifecycle/registration.go` `syncNode`), so it never takes them back.

Every object carries `accelpool.io/spec-hash` (`with_spec_hash`) so the reconciler rewrites it
only when what it renders changes. Pure: called by the reconciler, the `plan` command and tests.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import accelpool_api as api
from accelpool.decide.agent_access import DEFAULT_AGENT_IMAGE, DEFAULT_VENDOR_IMAGES, host_devices, image_for
from accelpool_api import conventions
from accelpool_core import catalog
from accelpool_core.protocol import CONFIG_ENV, AgentConfig, MatmulPolicy

AGENT_PORT = 9402
AGENT_LIVENESS_PATH = "/healthz"
"""The agent's liveness endpoint: 200 while its telemetry loop is alive (accelpool_agent.server)."""
AGENT_READINESS_PATH = "/readyz"
"""What the agent's readinessProbe asks (200 from its first telemetry tick until SIGTERM): a pod that
is not ready is left out of the DaemonSet's rollout progress. A GPU's health never makes it unready."""
KARPENTER_API_VERSION = "karpenter.sh/v1"
KARPENTER_NODE_CLASS = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}
KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
KARPENTER_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
KARPENTER_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_AWS_INSTANCE_TYPE = re.compile(r"^[a-z0-9-]+\.[a-z0-9]+$")
"""EC2 names (p5.48xlarge, p6-b200.48xlarge); the catalog also lists GCP and Azure machine types."""
_KARPENTER_REQUIREMENT_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)


@dataclass(frozen=True)
class AgentRendering:
    """How agent DaemonSets are rendered (operator flags `--agent-*`)."""

    namespace: str = conventions.DEFAULT_NAMESPACE
    image: str = DEFAULT_AGENT_IMAGE
    """The agent image of every vendor not in `images` (the default image carries NVIDIA's libraries),
    and of every pool whose backend is simulated (`fake`, `cpu`)."""
    images: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VENDOR_IMAGES))
    """Vendor (`amd`, `aws`, `google`, `nvidia`) → the agent image that carries its libraries."""
    image_pull_policy: str = "IfNotPresent"
    backend: str | None = None
    """One backend for every pool (`fake`, `cpu`: demos and tests); None: each vendor's from `backends`."""
    backends: Mapping[str, str] = field(default_factory=lambda: dict(api.VENDOR_BACKENDS))
    """Vendor → the agents' backend; a vendor missing here gets `VENDOR_BACKENDS`'s."""
    runtime_class: str | None = "nvidia"
    """runtimeClassName for NVIDIA pools (the NVIDIA container runtime); None to leave it unset."""
    privileged: bool = False
    """Run privileged with the host's /dev mounted instead of (or as well as) the NVIDIA runtime (as the
    image's user). The `amdsmi`, `neuron` and `tpu` backends always run so, as root (`agent_access`)."""
    service_account: str = "accelpool-agent"
    cpu_request: str = "50m"
    memory_request: str = "128Mi"
    cpu_limit: str | None = None
    memory_limit: str | None = "1Gi"
    priority_class: str | None = None
    port: int = AGENT_PORT


def agent_backend(spec: api.ComputePoolSpec, settings: AgentRendering) -> str:
    """The pool's agent backend: its own `spec.health.backend`, else the operator's one backend, else
    the backend for its accelerator's catalog vendor."""
    if spec.health.backend:
        return spec.health.backend
    if settings.backend:
        return settings.backend
    vendor = spec.resolve().entry.vendor.value
    return settings.backends.get(vendor) or api.VENDOR_BACKENDS[vendor]


def agent_image(spec: api.ComputePoolSpec, settings: AgentRendering) -> str:
    """The pool's agent image: its vendor's entry in `images`, else the default `image`; the default
    `image` too when its backend is simulated (`fake`, `cpu`: every image carries them)."""
    vendor = spec.resolve().entry.vendor.value
    return image_for(vendor, agent_backend(spec, settings), settings.image, settings.images)


def _security_context(backend: str, settings: AgentRendering) -> dict[str, Any]:
    """Privileged as root for the backends that open the host's devices; privileged as the image's
    user for NVIDIA with `settings.privileged`; otherwise the restricted Pod Security profile."""
    if host_devices(backend) is not None:
        return {"privileged": True, "runAsUser": 0, "runAsNonRoot": False, "readOnlyRootFilesystem": True}
    if settings.privileged:
        return {"privileged": True, "readOnlyRootFilesystem": True}
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def owner_reference(pool: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": pool,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def spec_hash(obj: Mapping[str, Any]) -> str:
    """A short stable hash of a rendered object (its hash annotation excluded)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_spec_hash(obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("annotations", {})[conventions.SPEC_HASH_ANNOTATION] = spec_hash(obj)
    return obj


def agent_config(pool: str, spec: api.ComputePoolSpec) -> AgentConfig:
    """The agent's settings for a pool: its health policy and the catalog's peaks for its accelerator."""
    entry = spec.resolve().entry
    peaks = {d.value: p for d in catalog.Dtype if (p := entry.peaks.get(d)) is not None}
    return AgentConfig(
        pool=pool,
        accelerator=entry.name,
        expected_tflops=peaks,
        expected_bandwidth_gbps=entry.bandwidth_gbps,
        interval_seconds=spec.health.interval_seconds,
        matmul=MatmulPolicy(dtype=spec.health.matmul.dtype, min_efficiency=spec.health.matmul.min_efficiency),
        expected_gpus=spec.resolve().count,
    )


def _labels(pool: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "accelpool-agent",
        "app.kubernetes.io/instance": pool,
        "app.kubernetes.io/component": "agent",
        conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY,
        conventions.POOL_LABEL: pool,
    }


def agent_tolerations(
    pool: str, spec: api.ComputePoolSpec, member_tolerations: Sequence[api.Toleration]
) -> list[dict[str, str]]:
    entry = spec.resolve().entry
    tolerations: list[dict[str, str]] = [
        {"key": conventions.POOL_TAINT_KEY, "operator": "Equal", "value": pool, "effect": conventions.NO_SCHEDULE},
        {"key": conventions.QUARANTINE_TAINT_KEY, "operator": "Exists", "effect": conventions.NO_SCHEDULE},
        {"key": conventions.BURN_IN_TAINT_KEY, "operator": "Exists", "effect": conventions.NO_SCHEDULE},
        {"key": entry.resource, "operator": "Exists", "effect": conventions.NO_SCHEDULE},
    ]
    for toleration in member_tolerations:
        rendered = toleration.model_dump(mode="json", exclude_none=True)
        covered = any(
            t["key"] == toleration.key and t["operator"] == "Exists" and t.get("effect") == toleration.effect
            for t in tolerations
        )
        if not covered and rendered not in tolerations and toleration.key != conventions.POOL_TAINT_KEY:
            tolerations.append(rendered)
    return tolerations


def daemonset(
    pool: str,
    uid: str,
    spec: api.ComputePoolSpec,
    settings: AgentRendering,
    member_tolerations: Sequence[api.Toleration] = (),
) -> dict[str, Any]:
    """The pool's agent DaemonSet (with its spec-hash annotation)."""
    entry = spec.resolve().entry
    nvidia = entry.vendor == catalog.Vendor.NVIDIA
    backend = agent_backend(spec, settings)
    labels = _labels(pool)
    selector = {"app.kubernetes.io/name": labels["app.kubernetes.io/name"], conventions.POOL_LABEL: pool}
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": CONFIG_ENV, "value": agent_config(pool, spec).model_dump_json(by_alias=True, exclude_none=True)},
    ]
    if nvidia:
        env += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
        ]
    resources: dict[str, dict[str, str]] = {
        "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request}
    }
    limits = {k: v for k, v in (("cpu", settings.cpu_limit), ("memory", settings.memory_limit)) if v}
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {
        "name": "agent",
        "image": agent_image(spec, settings),
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["accelpool-agent"],
        "args": [
            "run",
            "--node-name",
            "$(NODE_NAME)",
            "--listen",
            f"0.0.0.0:{settings.port}",
            "--backend",
            backend,
        ],
        "env": env,
        "ports": [{"name": "metrics", "containerPort": settings.port, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": AGENT_LIVENESS_PATH, "port": "metrics"},
            "initialDelaySeconds": 10,
            "periodSeconds": 30,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": AGENT_READINESS_PATH, "port": "metrics"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": resources,
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": settings.service_account,
        "nodeSelector": {conventions.POOL_LABEL: pool},
        "tolerations": agent_tolerations(pool, spec, member_tolerations),
        "containers": [container],
    }
    # The root filesystem is read-only; /tmp (CuPy's kernel cache, CUPY_CACHE_DIR) is an emptyDir.
    container["volumeMounts"] = [{"name": "tmp", "mountPath": "/tmp"}]
    pod_spec["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    container["securityContext"] = _security_context(backend, settings)
    if container["securityContext"].get("privileged"):
        container["volumeMounts"].append({"name": "dev", "mountPath": "/dev"})
        pod_spec["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})
    if nvidia and settings.runtime_class:
        pod_spec["runtimeClassName"] = settings.runtime_class
    if settings.priority_class:
        pod_spec["priorityClassName"] = settings.priority_class
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": conventions.agent_name(pool),
            "namespace": settings.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(pool, uid)],
        },
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {
                "metadata": {
                    "labels": dict(labels),
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(settings.port)},
                },
                "spec": pod_spec,
            },
        },
    }
    return with_spec_hash(obj)


def _karpenter_requirements(spec: api.ComputePoolSpec) -> list[dict[str, Any]]:
    resolved = spec.resolve()
    count = resolved.count
    requirements: list[dict[str, Any]] = []
    instance_types = sorted(
        {
            name
            for entry in resolved.matches
            for name, per_node in entry.detection.instance_types.items()
            if (count is None or per_node >= count) and _AWS_INSTANCE_TYPE.match(name)
        }
    )
    names = sorted({n for entry in resolved.matches for n in entry.detection.karpenter_names})
    gpu = resolved.entry.vendor == catalog.Vendor.NVIDIA
    name_key, count_key = (
        (KARPENTER_GPU_NAME, KARPENTER_GPU_COUNT) if gpu else (KARPENTER_ACCELERATOR_NAME, KARPENTER_ACCELERATOR_COUNT)
    )
    if names:
        requirements.append({"key": name_key, "operator": "In", "values": names})
    if count is not None and names:
        requirements.append({"key": count_key, "operator": "Gt", "values": [str(count - 1)]})
    memory = resolved.entry.detection.karpenter_memory_mib
    if gpu and memory is not None:
        requirements.append({"key": KARPENTER_GPU_MEMORY, "operator": "Gt", "values": [str(memory[0] - 1)]})
        requirements.append({"key": KARPENTER_GPU_MEMORY, "operator": "Lt", "values": [str(memory[1] + 1)]})
    if instance_types:
        requirements.append({"key": INSTANCE_TYPE, "operator": "In", "values": instance_types})
    for key, value in sorted(spec.node_selector.items()):
        requirements.append(_selector_requirement(key, value))
    return requirements


def _selector_requirement(key: str, value: str) -> dict[str, Any]:
    """A nodeSelector entry as a NodePool requirement. Karpenter's NodePool CRD refuses some keys (the
    requirements[].key pattern and rules of kubernetes-sigs/karpenter pkg/apis/crds/karpenter.sh_nodepools.yaml,
    added by hack/validation/requirements.sh): such a NodePool would be refused at every write, so the
    pool is set aside with the reason instead (`desired.render_owned`)."""
    restricted = (
        key in ("kubernetes.io/hostname", "karpenter.sh/nodepool")
        or (key != "karpenter.sh/capacity-type" and key.split("/", 1)[0].endswith("karpenter.sh"))
        or len(key) > 316
        or not _KARPENTER_REQUIREMENT_KEY.fullmatch(key)
    )
    if restricted:
        raise ValueError(f"nodeSelector key {key!r} cannot be a Karpenter NodePool requirement (Karpenter refuses it)")
    return {"key": key, "operator": "In", "values": [value]}


def devices_per_node(spec: api.ComputePoolSpec) -> int:
    """Devices a pool's node has: the requested count, else the largest AWS instance type's, else the usual."""
    resolved = spec.resolve()
    if resolved.count is not None:
        return resolved.count
    counts = [
        n
        for entry in resolved.matches
        for name, n in entry.detection.instance_types.items()
        if _AWS_INSTANCE_TYPE.match(name)
    ]
    return max(counts) if counts else resolved.entry.default_count


def nodepool(pool: str, uid: str, spec: api.ComputePoolSpec, *, burn_in: bool = False) -> dict[str, Any]:
    """The pool's `karpenter.sh/v1` NodePool: instances of its accelerator, labelled as members of the pool and
    tainted as them (`burn_in`: they start with the burn-in taint, which accelpool lifts once the node passed
    it). The same for every MIG layout and sharing config of the pool (see the module docstring)."""
    entry = spec.resolve().entry
    template_spec: dict[str, Any] = {
        "requirements": _karpenter_requirements(spec),
        "nodeClassRef": {**KARPENTER_NODE_CLASS, "name": spec.provisioner.node_class},
    }
    if spec.dedicated:
        template_spec["taints"] = [
            {"key": conventions.POOL_TAINT_KEY, "value": pool, "effect": conventions.NO_SCHEDULE}
        ]
    if burn_in:
        template_spec["startupTaints"] = [
            {
                "key": conventions.BURN_IN_TAINT_KEY,
                "value": conventions.BURN_IN_PENDING,
                "effect": conventions.NO_SCHEDULE,
            }
        ]
    obj: dict[str, Any] = {
        "apiVersion": KARPENTER_API_VERSION,
        "kind": "NodePool",
        "metadata": {
            "name": conventions.nodepool_name(pool),
            "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: pool},
            "ownerReferences": [owner_reference(pool, uid)],
        },
        "spec": {
            "template": {"metadata": {"labels": {conventions.POOL_LABEL: pool}}, "spec": template_spec},
            "limits": {entry.resource: str(spec.most_nodes * devices_per_node(spec))},
            # GPU nodes run long jobs: consolidate only nodes that are empty.
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
        },
    }
    return with_spec_hash(obj)
