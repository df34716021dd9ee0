"""Every label, taint, annotation and object name accelpool reads or writes on the cluster, in one place.

The planner, the renderers, the controller and the `plan` command all use these names, so the
ownership rules ("remove only what we set") can be checked against one list. Names derived
from a pool's name (config keys, DaemonSet and NodePool names) are kept within the 63-character
limit of label values, since most of them also end up as label values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from accelpool_core import protocol

DOMAIN = "accelpool.io"

# ---------------------------------------------------------------- node labels and taints we set

POOL_LABEL = protocol.POOL_LABEL
"""Label `accelpool.io/pool=<pool>` on every member: the source of truth for membership (the agents read it)."""
POOL_TAINT_KEY = f"{DOMAIN}/pool"
"""Taint `accelpool.io/pool=<pool>:NoSchedule` on members of dedicated pools."""
QUARANTINE_TAINT_KEY = f"{DOMAIN}/quarantined"
"""Taint `accelpool.io/quarantined=<reason>:NoSchedule` on quarantined members (remediation taint)."""
NO_SCHEDULE = "NoSchedule"

DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""Selects the node's key in the device-plugin ConfigMap (read by NVIDIA's config-manager sidecar)."""
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""Selects the node's entry in the mig-parted ConfigMap (read by NVIDIA's MIG manager)."""
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
"""Written by the MIG manager (pending, rebooting, success, failed). accelpool resets it to `pending` in
the same write that changes `nvidia.com/mig.config`, so a `success` about the previous config is never
read as success of the new one; otherwise it only reads it."""
MIG_DISABLED_CONFIG = "all-disabled"
"""The mig-parted entry a MIG node returns to when it leaves its pool."""
MIG_STATES = ("pending", "rebooting", "success", "failed")
"""The MIG manager's `nvidia.com/mig.config.state` values (NVIDIA/mig-parted `cmd/nvidia-mig-manager`)."""

# ---------------------------------------------------------------- labels NVIDIA's components publish (read only)

GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""`<model>`, `<model>-SHARED` (replicas > 1, not renamed), `<model>-MIG-<profile>` under the single
strategy (`+` written `.`), `<model>-MIG-INVALID` when the single strategy meets a layout it cannot
serve (NVIDIA/k8s-device-plugin `internal/lm/mig-strategy.go`)."""
GFD_COUNT_LABEL = "nvidia.com/gpu.count"
"""Physical GPUs; MIG devices under the single strategy; 0 with `-MIG-INVALID`."""
GFD_MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
"""`single` or `mixed`: the strategy GFD runs with (absent under `none`; `internal/lm/strategy.go`)."""
GFD_MIG_INVALID_SUFFIX = "-MIG-INVALID"
GPU_CLIQUE_LABEL = "nvidia.com/gpu.clique"
"""`<fabric cluster UUID>.<clique ID>`: the NVLink domain (clique) of the node's GPUs. GFD sets it only when every
fabric-attached GPU shares one cluster UUID and clique ID (NVIDIA/k8s-device-plugin `internal/lm/imex.go`); NVIDIA's
DRA compute-domain plugin can set it too (`gpuCliqueLabelEnabled`). No DRA device attribute carries it."""

# ---------------------------------------------------------------- other controllers' taints and roles

ACCELERATOR_TAINTS = ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "google.com/tpu", "sku=gpu")
"""Taints (`key` or `key=value`) that only mark a node as an accelerator node, tolerated when claiming.

GKE taints GPU nodes `nvidia.com/gpu=present:NoSchedule` and TPU nodes `google.com/tpu=present`;
EKS GPU and Neuron node groups are commonly tainted `nvidia.com/gpu` / `aws.amazon.com/neuron`;
AKS documents `sku=gpu:NoSchedule`; AMD's device plugin guide uses `amd.com/gpu`. Any other
NoSchedule or NoExecute taint (`dedicated=team-a`, `node-role.kubernetes.io/control-plane`)
reserves the node for someone else, and accelpool does not claim it. Operators extend the list
with `--tolerated-taints`.
"""
CONTROL_PLANE_ROLES = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
"""Nodes with either role label or taint are never claimed, whatever the tolerated taints say."""

# ---------------------------------------------------------------- node annotations we set

JOINED_ANNOTATION = f"{DOMAIN}/joined-at"
"""RFC 3339 time the node joined its pool (scale-down releases the most recent first)."""
CORDONED_ANNOTATION = f"{DOMAIN}/cordoned"
"""`true` when accelpool cordoned the node (remediation cordon); only such nodes are uncordoned."""
MIG_RETRY_ANNOTATION = f"{DOMAIN}/mig-retry"
"""`<retries>@<RFC 3339>` on a member whose MIG manager reported `failed`: when the failure was seen or
last retried (the MIG manager never retries by itself; the planner re-sets its label)."""
MIG_RETRIES = 5
MIG_RETRY_FIRST_SECONDS = 60.0
MIG_RETRY_MAX_SECONDS = 600.0
PRIOR_LABELS_ANNOTATION = f"{DOMAIN}/prior-labels"
"""JSON of the NVIDIA config labels' values before accelpool overwrote them; restored on release."""
CHECK_REQUEST_ANNOTATION = protocol.CHECK_REQUEST_ANNOTATION
"""A token asking for an immediate full check cycle: set on a node by a user, or on a pool and copied to its members."""
POOL_CHECK_REQUEST_ANNOTATION = f"{DOMAIN}/pool-check-requested"
"""The pool's check request last copied onto the member (`accelpool.decide.planning.check_requests`)."""
HEALTH_ANNOTATION = protocol.HEALTH_ANNOTATION
"""Written by the device agent: the compact `HealthReport`."""
HEALTH_CONDITION = protocol.CONDITION_TYPE
"""Node condition written by the device agent."""
HEALTH_STALE_SECONDS = 3 * protocol.AgentConfig().heartbeat_seconds
"""A condition the operator has seen unchanged for three heartbeat periods, by its own clock, was left by an agent
that stopped (`accelpool.runtime.controller.freshness`; `--agent-silent-after` shortens it for tests)."""
SILENT_AGENT_REASON = "AgentSilent"
"""The reason the operator reads a stale or foreign health condition as (status Unknown)."""

# ---------------------------------------------------------------- the remediation ladder (node annotation, label, pods)

REMEDIATION_ANNOTATION = f"{DOMAIN}/remediation"
"""JSON on a member accelpool quarantined: the ladder's `step` (quarantined, draining, drained, handed-off), the
`cause` (the health reason that made the quarantine, as in its taint), the recommended `action` (the agent's
`HealthReport.action`), `since` (when it was quarantined), the cause's `message`, `stepSince` (when the step
began) and `earlier` (the node's quarantines in the 24 hours before this one, which doubled its hold-down).
Written in the same patch as the quarantine, so it names the fault that caused it, whatever the agent reports
later (`accelpool.model.remediation_record`); removed when the quarantine is lifted or the node leaves its pool."""
QUARANTINE_HISTORY_ANNOTATION = f"{DOMAIN}/quarantine-history"
"""JSON on a member accelpool quarantined in the last 24 hours: when (`quarantines`, RFC 3339, oldest first, at
most `MAX_QUARANTINE_HISTORY`; `omitted` counts earlier ones not kept). A quarantine's hold-down doubles for each
of the node's quarantines in the 24 hours before it (`remediation_record.QuarantineHistory`), so a flapping GPU
stays out longer each time. Kept after the quarantine is lifted, rewritten without the quarantines older than
24 hours, removed once none is left or the node leaves its pool; delete it to forget a node's flapping."""
MAX_QUARANTINE_HISTORY = 8
"""The most quarantine times the history keeps: more than the hold-down's doublings need to be counted."""
REMEDIATION_ACTION_LABEL = f"{DOMAIN}/remediation-action"
"""`reset-gpu`, `restart-os` or `service-required` on a drained member handed off (`spec.health.handOff`): what the
external break-fix step (NVSentinel's fault remediation, a cloud's repair, a human) is asked to do. Removed with
the quarantine."""
HAND_OFF_ACTIONS = (protocol.Action.RESET_GPU, protocol.Action.RESTART_OS, protocol.Action.SERVICE_REQUIRED)
"""The recommended actions a hand-off asks for; a node whose action is `drain` (or none) only drains."""
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
"""On the API server's mirror of a kubelet's static pod: it cannot be evicted (kubectl drain skips it too)."""
DRAIN_RETRY_SECONDS = 10.0
"""A draining node's pods are listed (and refused evictions tried again) at most this often."""
# ---------------------------------------------------------------- burn-in

BURN_IN_TAINT_KEY = f"{DOMAIN}/burn-in"
"""Taint `accelpool.io/burn-in=<state>:NoSchedule` on a node that joined a pool and has not passed burn-in yet:
put on in the write that makes a static pool's node a member, and by Karpenter (a NodePool `startupTaints`
entry) on the nodes it provisions for a pool; only accelpool takes it off (`decide.planning.remediation.burnin`)."""
BURN_IN_PENDING = "pending"
"""The burn-in taint's value until the node's agent reports a passed full check cycle."""
BURN_IN_FAILED = "failed"
"""The burn-in taint's value once the node's AcceleratorHealthy turned False during burn-in. accelpool never
lifts it while the node is a member: a person (or a break-fix tool) who repaired the node sets it back to
`pending` (`kubectl taint node NODE accelpool.io/burn-in=pending:NoSchedule --overwrite`), and the node
burns in again; leaving the pool takes it off with everything else accelpool set."""

# ---------------------------------------------------------------- ConfigMaps and owned objects

MANAGED_KEYS_ANNOTATION = f"{DOMAIN}/managed-keys"
"""On the device-plugin ConfigMap: the data keys accelpool owns (comma-separated)."""
MANAGED_ENTRIES_ANNOTATION = f"{DOMAIN}/managed-entries"
"""On the MIG ConfigMap: the `mig-configs` entries accelpool owns (comma-separated)."""
SPEC_HASH_ANNOTATION = f"{DOMAIN}/spec-hash"
"""On DaemonSets and NodePools: hash of the rendered object, to write only when it changes."""
DEFAULT_DEVICE_PLUGIN_KEY = "default"
MIG_CONFIG_DATA_KEY = "config.yaml"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "accelpool"

DEFAULT_NAMESPACE = "accelpool-system"
DEFAULT_DEVICE_PLUGIN_CONFIGMAP = "accelpool-device-plugin-config"
DEFAULT_MIG_CONFIGMAP = "accelpool-mig-parted-config"

LABEL_VALUE_MAX = 63
_CONFIG_PREFIX = "accelpool-"
_DIGEST_LENGTH = 12
_AGENT_PREFIX = "accelpool-agent-"
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _bounded(prefix: str, name: str, limit: int = LABEL_VALUE_MAX) -> str:
    """`prefix + name` when it is shorter than `limit`, else a `limit`-character form ending in a hash of the name.

    Unique by construction: a full form is always shorter than `limit` and a hashed form is
    exactly `limit` long, so no pool's hashed name can equal another pool's full name, and two hashed
    forms differ by their 12-hex-digit (48-bit) SHA-256 of the whole name.
    """
    full = prefix + name
    if len(full) < limit:
        return full
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_LENGTH]
    head = full[: limit - _DIGEST_LENGTH - 1]
    if not head[-1].isalnum():  # keep the length; "x-" stays a valid DNS name where ".-" would not
        head = head[:-1] + "x"
    return f"{head}-{digest}"


CONTENT_DIGEST_LENGTH = 8
"""Hex digits of a config's content hash in its name (`accelpool-<pool>-<digest>`)."""


def config_name(pool: str, digest: str) -> str:
    """A pool's device-plugin key or mig-parted entry, named by its content: `accelpool-<pool>-<digest>`.

    NVIDIA's config-manager and MIG manager act only when the node label's *value* changes (the
    same value is "Already configured"), so a changed config must come under a new name: `digest`
    is a hash of the content (`accelpool.model.nvidia.content_digest`). At most 63 characters (a label
    value): the pool part is `_bounded` to 54, so two pools never share a name, and the last
    9 characters are always `-<digest>`.
    """
    head = _bounded(_CONFIG_PREFIX, pool, LABEL_VALUE_MAX - CONTENT_DIGEST_LENGTH - 1)
    return f"{head}-{digest[:CONTENT_DIGEST_LENGTH]}"


DNS_SUBDOMAIN_MAX = 253
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
"""The GPU Operator deploys its device plugin on a node unless this label is `false` (it fills the label only
when missing or empty: NVIDIA/gpu-operator `controllers/state_manager.go` `addGPUStateLabels`). A DRA pool's
members carry `false`: NVIDIA's DRA driver and its device plugin must never serve one node's GPUs together."""
GPU_UUID_ANNOTATION = f"{DOMAIN}/gpu-uuid"
"""On a DeviceTaintRule: the GPU whose fault it answers (a MIG device's parent)."""
GPU_HEALTHY_SINCE_ANNOTATION = f"{DOMAIN}/healthy-since"
"""On a DeviceTaintRule: when the GPU was first reported healthy again (the hold-down counts from it)."""
QUARANTINE_SINCE_ANNOTATION = f"{DOMAIN}/quarantined-since"
QUARANTINE_REASON_ANNOTATION = f"{DOMAIN}/reason"


def device_taint_rule_name(node: str, device: str) -> str:
    """`accelpool-<node>-<device>`: one DeviceTaintRule per quarantined device (cluster-scoped, a DNS subdomain)."""
    return _bounded(_CONFIG_PREFIX, f"{node}-{device}", DNS_SUBDOMAIN_MAX)


def device_class_name(pool: str) -> str:
    """`<pool>.accelpool.io`: the DeviceClass of a DRA pool, at most 63 characters (a longer pool name is hashed),
    so that its implicit extended resource `deviceclass.resource.kubernetes.io/<class>` is valid and Kueue can map
    it (a qualified name's part after the slash has at most 63)."""
    suffix = f".{DOMAIN}"
    if len(pool) + len(suffix) <= LABEL_VALUE_MAX:
        return pool + suffix
    return _bounded("", pool, LABEL_VALUE_MAX - len(suffix)) + suffix


def agent_name(pool: str) -> str:
    """The pool's agent DaemonSet: `accelpool-agent-<pool>`."""
    return _bounded(_AGENT_PREFIX, pool)


def nodepool_name(pool: str) -> str:
    """The pool's Karpenter NodePool: `accelpool-<pool>` (also a label value on its nodes)."""
    return _bounded(_CONFIG_PREFIX, pool)


def is_label_value(text: str) -> bool:
    return len(text) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE_RE.match(text))


def label_value(text: str, fallback: str = "Unknown") -> str:
    """Squeeze free text (an agent's reason) into a valid label/taint value."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text.strip())[:LABEL_VALUE_MAX]
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
    return cleaned or fallback


# ---------------------------------------------------------------- bounds on what accelpool reads and writes

MAX_MESSAGE = 1024
"""The longest message accelpool keeps from an agent or writes (conditions, Events, ladder records)."""
MAX_LISTED = 20
"""The most items a message or record lists (nodes, pods, problems)."""
MAX_EVENTS_PER_REASON = 10
"""The most Events one pass posts about one object for one reason; one more says how many were left out."""
CUT_MARK = " … (cut)"
"""Ends a message or list that was cut to its bound."""
PLAUSIBLE_PEAK_FACTOR = 4.0
"""A measured TFLOPS figure above this many times the catalog's peak for all the node's devices is implausible."""


def cut(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text`, or its first characters and `CUT_MARK` when it is longer than `limit`."""
    return text if len(text) <= limit else text[: max(0, limit - len(CUT_MARK))] + CUT_MARK


def some_of(
    items: Sequence[str],
    chars: int,
    most: int = MAX_LISTED,
    sep: str = ", ",
    tail_sep: str = " ",
    total: int | None = None,
) -> str:
    """`a, b, c and 37 more` (`tail_sep` before the `and`): the first items (at most `most`) that fit in `chars`
    characters with the count of the rest, which is never cut off; an item too long on its own is cut to fit.
    `total`: how many there are, when `items` holds only the first of them."""
    count = len(items) if total is None else max(total, len(items))
    shown: list[str] = []
    used = 0
    for index, item in enumerate(items[:most]):
        rest = count - index - 1
        tail = len(f"{tail_sep}and {rest} more") if rest else 0
        room = chars - used - (len(sep) if shown else 0) - tail
        if len(item) > room:
            if shown:
                break
            item = cut(item, max(len(CUT_MARK) + 1, room))
        shown.append(item)
        used += len(item) + (len(sep) if len(shown) > 1 else 0)
    left = count - len(shown)
    return sep.join(shown) + (f"{tail_sep}and {left} more" if left else "")
