"""The `resource.k8s.io` group (Dynamic Resource Allocation) as a kube-apiserver of a given release serves
it (`release.Release`): which of its kinds each version serves, and where their objects are stored. Pure.

Kinds (k8s.io/api resource/v1 types.go): DeviceClass and ResourceSlice (cluster-scoped), ResourceClaim
(namespaced, `status` subresource) and ResourceClaimTemplate (namespaced), DeviceTaintRule (cluster-scoped,
`status` subresource). What is served (pkg/registry/resource/rest/storage_resource.go, by release):

- `v1` (served by default since 1.34): the four core kinds; DeviceTaintRule too from 1.37 (GA there:
  `prerelease-lifecycle-gen:introduced=1.37` in k8s.io/api resource/v1), while the DRADeviceTaintRules
  gate is on;
- `v1beta2` (off by default: `--runtime-config=resource.k8s.io/v1beta2=true`): the same four, and
  DeviceTaintRule while the gate is on (1.36: beta, off by default).

Discovery announces exactly these (a client such as accelpool's operator tells from it whether
DeviceTaintRules exist: `devicetaintrules` in `resource.k8s.io/v1`). Every version's objects are one
storage, keyed by the `v1` resource (`resource.k8s.io/v1/resourceslices`): v1beta2 has v1's shape
(k8s.io/api resource/v1beta2 types.go), so an object read through the other version differs only in its
`apiVersion` (`conversion`). The `v1` key is the storage even where v1 does not serve the kind (a 1.36
DeviceTaintRule), as etcd keeps one version of every object whatever the request's.
"""

from __future__ import annotations

import kmock

from accelpool_demo.apiserver.release import Release

GROUP = "resource.k8s.io"
VERSIONS = ("v1", "v1beta2")
"""The versions modelled, newest first (discovery's order, its preferred version first)."""
STORAGE_VERSION = "v1"
DEVICE_CLASSES = "deviceclasses"
RESOURCE_SLICES = "resourceslices"
RESOURCE_CLAIMS = "resourceclaims"
CLAIM_TEMPLATES = "resourceclaimtemplates"
DEVICE_TAINT_RULES = "devicetaintrules"
TAINT_RULES_GATE = "DRADeviceTaintRules"
KINDS = {
    DEVICE_CLASSES: "DeviceClass",
    RESOURCE_SLICES: "ResourceSlice",
    RESOURCE_CLAIMS: "ResourceClaim",
    CLAIM_TEMPLATES: "ResourceClaimTemplate",
    DEVICE_TAINT_RULES: "DeviceTaintRule",
}
NAMESPACED = frozenset({RESOURCE_CLAIMS, CLAIM_TEMPLATES})
WITH_STATUS = frozenset({RESOURCE_CLAIMS, DEVICE_TAINT_RULES})
CORE = (DEVICE_CLASSES, RESOURCE_CLAIMS, CLAIM_TEMPLATES, RESOURCE_SLICES)
"""The kinds every modelled version serves."""
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})


def key(version: str, plural: str) -> str:
    """`resource.k8s.io/v1/resourceslices`: a resource as `resources.RESOURCES` keys resources."""
    return f"{GROUP}/{version}/{plural}"


def storage_key(plural: str) -> str:
    """Where the objects of a kind are stored, whichever version they are written through."""
    return key(STORAGE_VERSION, plural)


DEVICE_CLASSES_KEY = storage_key(DEVICE_CLASSES)
RESOURCE_SLICES_KEY = storage_key(RESOURCE_SLICES)
RESOURCE_CLAIMS_KEY = storage_key(RESOURCE_CLAIMS)
CLAIM_TEMPLATES_KEY = storage_key(CLAIM_TEMPLATES)
DEVICE_TAINT_RULES_KEY = storage_key(DEVICE_TAINT_RULES)


def info(plural: str) -> kmock.ResourceInfo:
    """The kind's discovery entry (no short names or categories, as the real one has none)."""
    return kmock.ResourceInfo(
        kind=KINDS[plural],
        singular=KINDS[plural].lower(),
        namespaced=plural in NAMESPACED,
        shortnames=set(),
        subresources={"status"} if plural in WITH_STATUS else set(),
        verbs=set(VERBS),
    )


KNOWN: dict[str, kmock.ResourceInfo] = {key(v, p): info(p) for v in VERSIONS for p in KINDS}
"""Every resource of the group that some modelled release serves (for naming kinds and storage)."""
STORED_AS: dict[str, str] = {k: storage_key(k.rsplit("/", 1)[1]) for k in KNOWN if not k.startswith(key("v1", ""))}
"""Resources stored as another's (the v1beta2 ones: as v1)."""


def plural_of(resource_key: str) -> str | None:
    """The kind's plural when `resource_key` is one of the group's resources, else None."""
    return resource_key.rsplit("/", 1)[1] if resource_key in KNOWN else None


def served(release: Release) -> dict[str, kmock.ResourceInfo]:
    """The group's resources a server of this release serves (see the module docstring)."""
    rules = release.gate(TAINT_RULES_GATE)
    found: dict[str, kmock.ResourceInfo] = {}
    for version in VERSIONS:
        if not release.serves(f"{GROUP}/{version}"):
            continue
        plurals = list(CORE)
        if rules and (version != "v1" or release.minor >= 37):
            plurals.append(DEVICE_TAINT_RULES)
        for plural in plurals:
            found[key(version, plural)] = KNOWN[key(version, plural)]
    return found


def rule_version(release: Release) -> str | None:
    """The version kube-controller-manager's device-taint-eviction controller writes DeviceTaintRule
    statuses through: v1 where it serves them (1.37), else v1beta2 (1.36:
    pkg/controller/devicetainteviction/device_taint_eviction.go applies through ResourceV1beta2); None
    where none is served."""
    for version in VERSIONS:
        if key(version, DEVICE_TAINT_RULES) in served(release):
            return version
    return None
