"""kube-controller-manager's resourceclaim controller, the parts a pod's claims go through: claims made from
ResourceClaimTemplates for a pod, and claims given back when their pods are gone. Pure: the driver
(`accelpool_demo.dra.components.DraScheduler`) sends what these functions decide.

After kubernetes/kubernetes `pkg/controller/resourceclaim/controller.go`:

- `syncPod`/`handleClaim` (`pod_claims_to_create`): for each `spec.resourceClaims[]` entry with a
  `resourceClaimTemplateName` whose claim is not recorded in `status.resourceClaimStatuses` (or is no
  longer the pod's), a claim owned by the pod that carries the annotation
  `resource.kubernetes.io/pod-claim-name: <entry>` is adopted; otherwise one is created from the template:
  `generateName: <pod>-<entry>-` (both parts cut in proportion when longer than 57 characters), the
  template's labels and annotations plus that annotation, the pod as controlling owner
  (`controller` and `blockOwnerDeletion` true), the template's spec. The names go into
  `status.resourceClaimStatuses` (`{name, resourceClaimName}`); a missing template is the Warning Event
  `FailedResourceClaimCreation`, `PodResourceClaim <entry>: resource claim template "<t>": ...`. A pod
  being deleted gets nothing. (The recorded answer for the generated `pod-tpl-gpu-szggp`,
  ../shared/fidelity/kubernetes/dra.yaml, shows no `blockOwnerDeletion`, a trimmed body; the code sets
  it, and the code wins; tests/conformance compares that trimmed body on the keys it holds.)
- `syncClaim` (`claim_release`): `status.reservedFor` entries for pods that are gone, replaced (another
  uid) or done (`isPodDone`: Succeeded or Failed, or deleted before being scheduled) are dropped; a claim
  left with none loses its allocation (structured parameters: the scheduler allocated it, which the
  finalizer `resource.kubernetes.io/delete-protection` says) and then that finalizer; a generated claim
  nobody reserves whose pod is done (or another pod now) is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
"""`resourceapi.Finalizer`: set by the scheduler when it allocates, removed once the claim is deallocated."""
MAX_BASE_LENGTH = 57
"""`handleClaim`'s limit for `<pod>-<claim>-`, leaving room for the 5 random characters of `generateName`."""


def generate_name(pod: str, pod_claim: str) -> str:
    """`handleClaim`: `<pod>-<claim>-`, both parts cut in proportion when that is longer than 57 characters."""
    name = f"{pod}-{pod_claim}-"
    if len(name) <= MAX_BASE_LENGTH:
        return name
    total = len(name)
    return f"{pod[: len(pod) * MAX_BASE_LENGTH // total]}-{pod_claim[: len(pod_claim) * MAX_BASE_LENGTH // total]}"


def owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """`resourceclaim.IsForPod`: the pod is the claim's controlling owner."""
    uid = (pod.get("metadata") or {}).get("uid")
    return any(
        ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1" and ref.get("uid") == uid
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or []
    )


class NotCreatedYet(Exception):
    """A template entry whose claim is not in `status.resourceClaimStatuses` yet (`resourceclaim.ErrClaimNotFound`)."""


def claim_name(pod: Mapping[str, Any], entry: Mapping[str, Any]) -> str | None:
    """`resourceclaim.Name`: the claim a `spec.resourceClaims[]` entry stands for. None: the entry needs no
    claim (its status entry has no name); `NotCreatedYet` for a template entry not recorded yet."""
    if entry.get("resourceClaimName"):
        return str(entry["resourceClaimName"])
    if entry.get("resourceClaimTemplateName"):
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == entry.get("name"):
                return str(status["resourceClaimName"]) if status.get("resourceClaimName") else None
        raise NotCreatedYet(f'pod "{(pod.get("metadata") or {}).get("name")}": ResourceClaim not created yet')
    raise NotCreatedYet(f"pod resource claim {entry.get('name')!r}: neither a claim nor a template")


def claim_from_template(
    pod: Mapping[str, Any], entry: Mapping[str, Any], template: Mapping[str, Any]
) -> dict[str, Any]:
    """The ResourceClaim `handleClaim` creates for a template entry."""
    metadata = pod.get("metadata") or {}
    template_spec = template.get("spec") or {}
    template_metadata = template_spec.get("metadata") or {}
    annotations = {**(template_metadata.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: str(entry["name"])}
    claim_metadata: dict[str, Any] = {
        "generateName": generate_name(str(metadata.get("name")), str(entry["name"])),
        "namespace": metadata.get("namespace"),
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": metadata.get("name"),
                "uid": metadata.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "annotations": annotations,
    }
    if template_metadata.get("labels"):
        claim_metadata["labels"] = dict(template_metadata["labels"])
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": claim_metadata,
        "spec": dict(template_spec.get("spec") or {}),
    }


@dataclass(frozen=True)
class PodClaims:
    """What `syncPod` does for one pod: claims to create (entry → body), claims adopted (entry → name), and the
    Warning events of entries it could not serve."""

    create: dict[str, dict[str, Any]] = field(default_factory=dict)
    adopt: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def statuses(self, pod: Mapping[str, Any], created: Mapping[str, str]) -> list[dict[str, str]] | None:
        """The pod's new `status.resourceClaimStatuses` once `created` (entry → name) exist; None: unchanged."""
        new = {**self.adopt, **created}
        if not new:
            return None
        kept = [
            dict(s) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [] if s.get("name") not in new
        ]
        return kept + [{"name": name, "resourceClaimName": claim} for name, claim in new.items()]


def pod_claims_to_create(
    pod: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]], claims: Mapping[str, Mapping[str, Any]]
) -> PodClaims:
    """`syncPod` for a pod: `templates` and `claims` are the pod's namespace's, by name."""
    result = PodClaims()
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return result
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        template_name = entry.get("resourceClaimTemplateName")
        if not template_name:
            continue
        try:
            name = claim_name(pod, entry)
        except NotCreatedYet:
            name = ""
        if name is None:
            continue
        if name and name in claims and owned_by(claims[name], pod):
            continue
        orphan = next(
            (
                n
                for n, c in sorted(claims.items())
                if owned_by(c, pod)
                and ((c.get("metadata") or {}).get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == entry["name"]
            ),
            None,
        )
        if orphan is not None:
            result.adopt[str(entry["name"])] = orphan
            continue
        template = templates.get(str(template_name))
        if template is None:
            result.failures.append(
                f'PodResourceClaim {entry["name"]}: resource claim template "{template_name}": '
                f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
            )
            continue
        result.create[str(entry["name"])] = claim_from_template(pod, entry, template)
    return result


def pod_done(pod: Mapping[str, Any]) -> bool:
    """`isPodDone`: none of its containers is running or ever will."""
    phase = (pod.get("status") or {}).get("phase")
    deleted_unscheduled = bool((pod.get("metadata") or {}).get("deletionTimestamp")) and not (
        pod.get("spec") or {}
    ).get("nodeName")
    return phase in ("Succeeded", "Failed") or deleted_unscheduled


@dataclass(frozen=True)
class ClaimRelease:
    """What `syncClaim` writes to one claim: its new `reservedFor` (None: unchanged), whether the allocation
    goes, the finalizers it keeps (None: unchanged), and whether the claim is deleted."""

    reserved_for: list[dict[str, Any]] | None = None
    deallocate: bool = False
    finalizers: list[str] | None = None
    delete: bool = False

    def __bool__(self) -> bool:
        return self.reserved_for is not None or self.deallocate or self.finalizers is not None or self.delete


def _owning_pod(claim: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return str(ref.get("name")), str(ref.get("uid"))
    return None


def claim_release(claim: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]]) -> ClaimRelease:
    """`syncClaim` for one claim; `pods` are its namespace's, by name."""
    status = claim.get("status") or {}
    reserved = list(status.get("reservedFor") or [])
    valid = []
    for entry in reserved:
        if entry.get("apiGroup") or entry.get("resource") != "pods":
            valid.append(entry)
            continue
        pod = pods.get(str(entry.get("name")))
        if pod is None or (pod.get("metadata") or {}).get("uid") != entry.get("uid") or pod_done(pod):
            continue
        valid.append(entry)
    finalizers = list((claim.get("metadata") or {}).get("finalizers") or [])
    protected = DELETE_PROTECTION_FINALIZER in finalizers
    without = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
    deleting = bool((claim.get("metadata") or {}).get("deletionTimestamp"))
    if len(valid) < len(reserved):
        deallocate = not valid and protected and bool(status.get("allocation"))
        release = ClaimRelease(
            reserved_for=valid,
            deallocate=deallocate,
            finalizers=without if protected and not valid else None,
        )
    elif protected and deleting and not valid:
        release = ClaimRelease(deallocate=bool(status.get("allocation")), finalizers=without)
    else:
        release = ClaimRelease()
    if not valid and not deleting:
        owner = _owning_pod(claim)
        if owner is not None:
            pod = pods.get(owner[0])
            if pod is not None and ((pod.get("metadata") or {}).get("uid") != owner[1] or pod_done(pod)):
                release = ClaimRelease(release.reserved_for, release.deallocate, release.finalizers, delete=True)
    return release


def claims_by_name(claims: Sequence[Mapping[str, Any]], namespace: str) -> dict[str, Mapping[str, Any]]:
    return {str(c["metadata"]["name"]): c for c in claims if (c.get("metadata") or {}).get("namespace") == namespace}
