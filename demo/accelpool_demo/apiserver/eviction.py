"""The pods' eviction subresource, `POST /api/v1/namespaces/{ns}/pods/{name}/eviction`, as
pkg/registry/core/pod/storage/eviction.go (`EvictionREST.Create`) answers it. Pure: `Store.evict`
applies what it decides to the stored pod and PodDisruptionBudget.

- the body: a policy/v1 Eviction (policy/v1beta1 accepted too: `AcceptsGroupVersion`); its
  `metadata.name` must be the URL's (400 `name in URL does not match name in Eviction object`), its
  `deleteOptions` are a DELETE's (`pods.DeleteOptions`);
- a pod that is Pending, Succeeded, Failed or already terminating is deleted without a look at any
  budget (`canIgnorePDB`);
- more than one PDB selecting the pod: 500 `This pod has more than one PodDisruptionBudget, which the
  eviction subresource does not support.` (a Status the handler returns, with no reason);
- a pod that is not Ready is deleted without using the budget when its PDB says
  `unhealthyPodEvictionPolicy: AlwaysAllow`, or (IfHealthyBudget, the default) when
  currentHealthy ≥ desiredHealthy > 0;
- `checkAndDecrement`: a PDB whose status has not observed its generation → 429 (`is still being
  processed by the server`, Retry-After 10); disruptionsAllowed negative → 403; more than 2000
  disruptedPods → 403; disruptionsAllowed 0 → 429 `Cannot evict pod as it would violate the pod's
  disruption budget.` with the DisruptionBudget cause `The disruption budget <name> needs <desired>
  healthy pods and has <current> currently`; otherwise disruptionsAllowed - 1 (and the
  `DisruptionAllowed` condition when it reaches 0) and the pod in `disruptedPods`, written to the PDB's
  status before the pod is touched;
- then the pod gets the `DisruptionTarget` condition (`EvictionByEvictionAPI`) and is deleted as a
  DELETE with the Eviction's options deletes it (graceful deletion: `pods.deletion`); a precondition
  that does not hold is a 409 (`addConditionAndDeletePod`); success is 201 with a Success Status.

The handler's retries on conflicts are not needed: the store applies an eviction under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accelpool_demo.apiserver import disruption
from accelpool_demo.apiserver.pods import DeleteOptions, phase, ready, terminating
from accelpool_demo.apiserver.resources import StatusError, refused, status_body
from accelpool_demo.apiserver.selectors import selects
from accelpool_demo.apiserver.writes import JsonObject, timestamp

API_VERSIONS = ("policy/v1", "policy/v1beta1")
MAX_DISRUPTED_PODS = 2000
"""eviction.go `MaxDisruptedPodSize`."""
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
SUCCESS: JsonObject = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
"""What a successful eviction answers (201: the create handler's code on a Status without one)."""


def options_of(body: Any, name: str, namespace: str | None, params: Mapping[str, str]) -> DeleteOptions:
    """The DeleteOptions of an Eviction sent for the pod `name`; 400 for a body that is not one."""
    if not isinstance(body, Mapping):
        raise refused(400, "BadRequest", "the body of an eviction must be a policy/v1 Eviction object")
    api_version = body.get("apiVersion")
    if api_version is not None and api_version not in API_VERSIONS:
        raise refused(
            400,
            "BadRequest",
            f"the API version in the data ({api_version}) does not match the expected API version (policy/v1)",
        )
    if body.get("kind") not in (None, "Eviction"):
        raise refused(
            400,
            "BadRequest",
            f"kind: {body.get('kind')!r} is not Eviction (the eviction subresource takes an Eviction)",
        )
    metadata = body.get("metadata") or {}
    if metadata.get("namespace") not in (None, namespace):
        raise refused(
            400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request"
        )
    if metadata.get("name") != name:
        raise refused(400, "BadRequest", "name in URL does not match name in Eviction object")
    return DeleteOptions.parse(body.get("deleteOptions"), params, where="deleteOptions")


def can_ignore_budgets(pod: Mapping[str, Any]) -> bool:
    """`canIgnorePDB`."""
    return phase(pod) in ("Succeeded", "Failed", "Pending") or terminating(pod)


def budgets_of(pod: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`getPodDisruptionBudgets`: the PDBs of the pod's namespace whose selector selects it."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return [b for b in budgets if selects((b.get("spec") or {}).get("selector"), labels)]


def more_than_one_budget() -> StatusError:
    message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    return StatusError.of(status_body(500, message))


def unhealthy_may_go(pod: Mapping[str, Any], budget: Mapping[str, Any]) -> bool:
    """Whether a pod that is not Ready goes without using the budget (unhealthyPodEvictionPolicy)."""
    if ready(pod):
        return False
    if (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == disruption.ALWAYS_ALLOW:
        return True
    status = budget.get("status") or {}
    return int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0) > 0


def _too_many_requests(cause: str, retry_after: int) -> StatusError:
    """`errors.NewTooManyRequests` with a DisruptionBudget cause (and Retry-After when it asks for one)."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}  # StatusCause.Type
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    return StatusError.of(status_body(429, VIOLATION, "TooManyRequests", **details), headers)


def decremented(budget: Mapping[str, Any], pod: str, now: float) -> JsonObject:
    """`checkAndDecrement`: the budget's status with one disruption used by `pod`, or the refusal."""
    name = budget["metadata"]["name"]
    status = dict(budget.get("status") or {})
    allowed = int(status.get("disruptionsAllowed") or 0)
    if int(status.get("observedGeneration") or 0) < int(budget["metadata"].get("generation") or 1):
        raise _too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)
    forbidden = None
    if allowed < 0:
        forbidden = "pdb disruptions allowed is negative"
    elif len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        forbidden = "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
    if forbidden is not None:
        message = f'poddisruptionbudget.policy "{name}" is forbidden: {forbidden}'
        raise refused(403, "Forbidden", message, name=name, group="policy", kind="poddisruptionbudget")
    if allowed == 0:
        desired, current = status.get("desiredHealthy", 0), status.get("currentHealthy", 0)
        raise _too_many_requests(
            f"The disruption budget {name} needs {desired} healthy pods and has {current} currently", 0
        )
    status["disruptionsAllowed"] = allowed - 1
    if allowed == 1:
        disruption.with_allowed_condition(status, now)
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod: timestamp(now)}
    return status


def check_latest(pod: Mapping[str, Any], options: DeleteOptions) -> None:
    """`addConditionAndDeletePod`'s preconditions, checked against the stored pod: 409."""
    metadata = pod.get("metadata") or {}
    failed = None
    if options.uid and options.uid != metadata.get("uid"):
        failed = (
            f"the UID in the precondition ({options.uid}) does not match the UID in record ({metadata.get('uid')}). "
            "The object might have been deleted and then recreated"
        )
    elif options.resource_version and options.resource_version != metadata.get("resourceVersion"):
        failed = (
            f"the ResourceVersion in the precondition ({options.resource_version}) does not match the "
            f"ResourceVersion in record ({metadata.get('resourceVersion')}). The object might have been modified"
        )
    if failed is not None:
        name = metadata.get("name")
        raise refused(
            409, "Conflict", f'Operation cannot be fulfilled on Pod "{name}": {failed}', name=name, kind="Pod"
        )


def disruption_target(now: float) -> JsonObject:
    """The condition an eviction sets on the pod before deleting it (PodDisruptionConditions, GA in 1.31)."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "lastTransitionTime": timestamp(now),
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
