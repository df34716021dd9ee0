"""Admission as the emulated API server does it, and the ComputePool's scale subresource.

- Pods: the two admission plugins that refuse agent pods on a cluster not set up for them, in the
  API server's order (pkg/kubeapiserver/options/plugins.go lists ServiceAccount before RuntimeClass)
  and with their messages, wrapped by admission.NewForbidden (403, `pods "<name>" is forbidden: ...`):
  plugin/pkg/admission/serviceaccount/admission.go (`error looking up service account <ns>/<name>:
  serviceaccount "<name>" not found`) and plugin/pkg/admission/runtimeclass/admission.go (`pod
  rejected: RuntimeClass "<name>" not found`). Quotas, LimitRanges and Pod Security are not modelled.
- PodDisruptionBudgets: pkg/apis/policy/validation/validation.go `ValidatePodDisruptionBudgetSpec`:
  minAvailable and maxUnavailable not both set, each a non-negative integer or a percentage of at most
  100% (apps validation's `ValidatePositiveIntOrPercent`, `IsNotMoreThan100Percent`), and
  unhealthyPodEvictionPolicy IfHealthyBudget or AlwaysAllow; 422 with one cause per field (the bad
  value is shown as JSON, where the real message prints the Go value). Selectors are not validated.
- `computepools/NAME/scale`: the autoscaling/v1 Scale of the CRD's scale subresource
  (specReplicasPath .spec.nodes, statusReplicasPath .status.nodes.members, labelSelectorPath
  .status.selector), what `kubectl scale` reads and writes.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from accelpool_demo.apiserver import validation as kube_validation
from accelpool_demo.apiserver.resources import RUNTIME_CLASSES, SERVICE_ACCOUNTS, bad_request, error, forbidden
from accelpool_demo.apiserver.writes import JsonObject

DEFAULT_SERVICE_ACCOUNT = "default"
"""Every namespace has it (kube-controller-manager's serviceaccount controller creates it)."""
Exists = Callable[[str, str | None, str], bool]
"""Whether a stored object exists: (resource key, namespace, name)."""


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def admit_node(node: JsonObject, current: Mapping[str, Any] | None, *, taint: bool = True) -> JsonObject:
    """A Node as admission leaves it: on creation the TaintNodesByCondition plugin adds the not-ready taint
    the node lifecycle controller lifts once the node is Ready (plugin/pkg/admission/nodetaint/admission.go,
    when `taint`); then validated (`kube_validation.node`), 422 when it is refused."""
    if current is None and taint:
        spec = node.setdefault("spec", {})
        taints = spec.get("taints") or []
        if not any(
            t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == NOT_READY_TAINT["effect"] for t in taints
        ):
            spec["taints"] = [*taints, dict(NOT_READY_TAINT)]
    errors = kube_validation.node(node, current)
    if errors:
        raise kube_validation.refusal("Node", "", (node.get("metadata") or {}).get("name"), errors)
    return node


def lifted_not_ready(node: Mapping[str, Any]) -> JsonObject | None:
    """A Ready node without its not-ready taint, or None when it is not Ready or has no such taint."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    kept = [t for t in taints if not (t.get("key") == NOT_READY_TAINT["key"] and t.get("effect") == "NoSchedule")]
    if not ready or len(kept) == len(taints):
        return None
    lifted = copy.deepcopy(dict(node))
    if kept:
        lifted["spec"]["taints"] = kept
    else:
        del lifted["spec"]["taints"]
    return lifted


def admit_event(event: JsonObject, namespace: str | None, *, strict: bool, namespaces: bool) -> JsonObject:
    """A new core/v1 Event as its validation judges it (`kube_validation.event`; `strict`: created through
    events.k8s.io/v1), 422 when it is refused; without `namespaces`, the rule that puts an Event about an
    object of no namespace in `default` is left out (see `Store.strict_event_namespaces`)."""
    errors = kube_validation.event(event, namespace, strict=strict)
    if not namespaces:
        errors = [e for e in errors if e.field != "involvedObject.namespace" or e.value != ""]
    if errors:
        raise kube_validation.refusal("Event", "", (event.get("metadata") or {}).get("name"), errors)
    return event


def admit_pod(exists: Exists, namespace: str | None, pod: Mapping[str, Any]) -> None:
    """403 for a pod whose ServiceAccount or RuntimeClass does not exist."""
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or metadata.get("generateName") or "Unknown")
    spec = pod.get("spec") or {}
    account = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT)
    if account != DEFAULT_SERVICE_ACCOUNT and not exists(SERVICE_ACCOUNTS, namespace, account):
        raise forbidden(
            "pods",
            name,
            f'error looking up service account {namespace}/{account}: serviceaccount "{account}" not found',
        )
    runtime_class = spec.get("runtimeClassName")
    if runtime_class and not exists(RUNTIME_CLASSES, None, str(runtime_class)):
        raise forbidden("pods", name, f'pod rejected: RuntimeClass "{runtime_class}" not found')


_PERCENT = re.compile(r"^[0-9]+%$")
EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def _int_or_percent_problems(value: Any) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return ["must be an integer or percentage (e.g '5%')"]
    if isinstance(value, int):
        return ["must be greater than or equal to 0"] if value < 0 else []
    if not _PERCENT.match(value):
        return [
            "a valid percent string must be a numeric string followed by an ending '%' "
            "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
        ]
    return ["must not be greater than 100%"] if int(value[:-1]) > 100 else []


def admit_budget(budget: Mapping[str, Any]) -> None:
    """422 for a PodDisruptionBudget spec the API server refuses."""
    spec = budget.get("spec") or {}
    problems: list[tuple[str, Any, str]] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        shown = {  # the internal type, printed with its Go field names (%v of the struct as JSON)
            "MinAvailable": spec.get("minAvailable"),
            "Selector": spec.get("selector"),
            "MaxUnavailable": spec.get("maxUnavailable"),
            "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
        }
        problems.append(
            (
                "spec",
                kube_validation.Raw(json.dumps(shown, separators=(",", ":"))),
                "minAvailable and maxUnavailable cannot be both set",
            )
        )
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            problems += [(f"spec.{field}", spec[field], why) for why in _int_or_percent_problems(spec[field])]
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in EVICTION_POLICIES)
        problems.append(("spec.unhealthyPodEvictionPolicy", policy, f"supported values: {supported}"))
    if not problems:
        return
    causes = [
        {
            "reason": "FieldValueNotSupported" if "supported values" in why else "FieldValueInvalid",
            "message": f"{'Unsupported' if 'supported values' in why else 'Invalid'} value: "
            f"{kube_validation.go_value(value)}: {why}",
            "field": path,
        }
        for path, value, why in problems
    ]
    listed = [f"{cause['field']}: {cause['message']}" for cause in causes]
    name = (budget.get("metadata") or {}).get("name")
    message = f'PodDisruptionBudget.policy "{name}" is invalid: ' + (
        listed[0] if len(listed) == 1 else f"[{', '.join(listed)}]"
    )
    raise error(
        422, "Invalid", message, {"name": name, "group": "policy", "kind": "PodDisruptionBudget", "causes": causes}
    )


def scale_of(pool: Mapping[str, Any]) -> JsonObject:
    """The autoscaling/v1 Scale a pool's scale subresource serves."""
    metadata = pool.get("metadata") or {}
    status = pool.get("status") or {}
    scale: JsonObject = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: metadata[k] for k in ("name", "uid", "resourceVersion", "creationTimestamp") if k in metadata},
        "spec": {"replicas": (pool.get("spec") or {}).get("nodes", 1)},
        "status": {"replicas": (status.get("nodes") or {}).get("members", 0)},
    }
    if status.get("selector"):
        scale["status"]["selector"] = status["selector"]
    return scale


def scaled(pool: Mapping[str, Any], method: kmock.method, body: Any) -> JsonObject:
    """The pool a PUT or merge PATCH of its Scale asks for (a PUT without replicas asks for zero, as an
    absent int32 is); the Scale's resourceVersion, when sent, travels as the pool's precondition."""
    if not isinstance(body, dict):
        raise bad_request("a Scale is written with PUT or a merge patch of a JSON object")
    replicas = (body.get("spec") or {}).get("replicas")
    if replicas is None and method == kmock.method.PUT:
        replicas = 0
    result = copy.deepcopy(dict(pool))
    sent = (body.get("metadata") or {}).get("resourceVersion")
    result["metadata"] = {k: v for k, v in result["metadata"].items() if k != "resourceVersion"}
    if sent:
        result["metadata"]["resourceVersion"] = sent
    elif "resourceVersion" in (pool.get("metadata") or {}):
        result["metadata"]["resourceVersion"] = pool["metadata"]["resourceVersion"]
    if replicas is not None:
        result.setdefault("spec", {})["nodes"] = replicas
    return result
