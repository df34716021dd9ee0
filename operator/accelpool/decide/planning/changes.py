"""What the pass writes on each member of a valid pool: labels, annotations, taints.

Every member gets the pool label `accelpool.io/pool=<pool>`; members of NVIDIA pools the
device-plugin config label (the pool's key, named by its content: `accelpool.model.nvidia.member_configs`)
and, where MIG matters, `nvidia.com/mig.config` (the pool's layout entry, also named by its content,
or `all-disabled` on MIG-capable GPUs of a whole-GPU pool, or else the device plugin advertises MIG
devices as GPUs). An edited pool's configs get new names, so the label values change and NVIDIA's
config-manager and MIG manager act on them. Nodes Karpenter launches for a pool are members like
any other: its NodePool's template gives them only the pool label and the config labels come from
here, so an edit reconfigures them in place (`accelpool.decide.render.nodepool`). Values of another
controller that accelpool overwrites on a new member are kept in `accelpool.io/prior-labels` and
restored on release (`Ledger.release`). Also: `accelpool.io/joined-at` (static pools; sizing releases the newest
first), the pool taint of dedicated pools, the MIG retry record (`accelpool.decide.planning.mig_retry`),
the quarantine (`accelpool.decide.planning.remediation.quarantine.apply_quarantine`) and the burn-in taint, put on
in the same write that makes a node a member (`accelpool.decide.planning.remediation.burnin.apply_burn_in`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from accelpool.decide.planning import mig_retry
from accelpool.decide.planning.check_requests import copy_pool_request
from accelpool.decide.planning.ledger import Ledger, NodeEdit
from accelpool.decide.planning.model import ConfigSync
from accelpool.decide.planning.pools import PoolWork
from accelpool.decide.planning.remediation.burnin import apply_burn_in
from accelpool.decide.planning.remediation.quarantine import apply_quarantine
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView, Taint, format_time
from accelpool_api import conventions, workloads

_CONFIG_LABELS = (conventions.DEVICE_PLUGIN_CONFIG_LABEL, conventions.MIG_CONFIG_LABEL)


@dataclass(frozen=True)
class MemberConfig:
    """The NVIDIA configs a pool's members select."""

    pool: str
    device_plugin: str | None
    """The device-plugin config key (NVIDIA pools), else None."""
    mig: str | None
    """The mig-parted config: the pool's layout, `all-disabled` for whole MIG-capable GPUs, else None."""
    per_gpu: dict[str, int]
    """What each GPU of a member advertises once it serves the pool's config."""
    dra: bool = False
    """NVIDIA's DRA driver serves the GPUs: the GPU Operator's device plugin stays off the members."""

    @classmethod
    def of(cls, work: PoolWork) -> MemberConfig:
        found = nvidia.member_configs(work.name, work.spec, work.resolved)
        per_gpu = workloads.resources_per_gpu(work.spec, work.resolved)
        return cls(work.name, found.device_plugin, found.mig, per_gpu, dra=work.spec.allocation == "DRA")

    @property
    def labels(self) -> dict[str, str]:
        """The labels every member gets, static and Karpenter pools alike (a Karpenter NodePool's template carries
        only the pool label: `accelpool.decide.render.nodepool`)."""
        found = {conventions.POOL_LABEL: self.pool}
        if self.device_plugin is not None:
            found[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = self.device_plugin
        if self.mig is not None:
            found[conventions.MIG_CONFIG_LABEL] = self.mig
        if self.dra:
            found[conventions.DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
        return found


def member_changes(ledger: Ledger, work: PoolWork, now: datetime, sync: ConfigSync | None = None) -> None:
    """Put the pool's labels, annotations and taints on each member, those Karpenter launched included.

    A member already in another config of the pool's (an edited pool) moves to the new one only once its
    pods can read it (`sync`, `_held`). A joining node gets the device-plugin key at once (a sidecar that
    cannot read it yet exits, and reads the label again when the kubelet restarts it) but its MIG entry only
    once the MIG manager can read it (`_set_mig_label`)."""
    config = MemberConfig.of(work)
    labels = config.labels
    pool, karpenter, dedicated = work.name, work.karpenter, work.spec.dedicated
    joined = format_time(now)
    pool_taint = Taint(conventions.POOL_TAINT_KEY, conventions.NO_SCHEDULE, pool) if dedicated else None
    new_names = {v.name for v in work.new_members}
    for view in [*work.members, *work.new_members]:
        original = ledger.edits[view.name].view if view.name in ledger.edits else view
        edit = ledger.edit(original)
        edit.pool = pool
        new = view.name in new_names
        prior = _prior_labels_of_new(edit, labels, ledger) if new else dict(original.prior_labels)
        edit.labels[conventions.POOL_LABEL] = pool
        if config.device_plugin is not None:
            key_now = edit.label(conventions.DEVICE_PLUGIN_CONFIG_LABEL)
            held = (
                sync is not None
                and not new
                and key_now is not None
                and _held(sync, sync.device_plugin, key_now, config.device_plugin, ledger, now)
            )
            edit.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = key_now if held else config.device_plugin
        elif ledger.ours(edit.label(conventions.DEVICE_PLUGIN_CONFIG_LABEL)):  # the pool left NVIDIA behind
            edit.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = prior.pop(
                conventions.DEVICE_PLUGIN_CONFIG_LABEL, None
            )
        _set_mig_label(edit, original, config, prior, ledger, now, sync)
        _set_deploy_label(edit, config, prior)
        if not karpenter:
            edit.annotations[conventions.JOINED_ANNOTATION] = (
                joined if new else (original.annotations.get(conventions.JOINED_ANNOTATION) or joined)
            )
        prior_text = _prior_text(tuple(sorted(prior.items()))) if prior else None
        if prior_text != original.annotations.get(conventions.PRIOR_LABELS_ANNOTATION):
            edit.annotations[conventions.PRIOR_LABELS_ANNOTATION] = prior_text
        elif conventions.PRIOR_LABELS_ANNOTATION in edit.annotations:
            del edit.annotations[conventions.PRIOR_LABELS_ANNOTATION]
        if pool_taint is not None:
            edit.put_taint(pool_taint)
        else:
            edit.drop_taints(conventions.POOL_TAINT_KEY)
        apply_quarantine(work.remediation, view, edit)
        apply_burn_in(work.burn_in, view, edit, joining=new)
        copy_pool_request(edit, work.input.check_request)


def _set_deploy_label(edit: NodeEdit, config: MemberConfig, prior: dict[str, str | None]) -> None:
    """A DRA pool keeps the GPU Operator's device plugin off its members (`nvidia.com/gpu.deploy.device-plugin
    =false`), remembering what the node had (restored on release, or when the pool goes back to the plugin)."""
    label = conventions.DEVICE_PLUGIN_DEPLOY_LABEL
    current = edit.label(label)
    if config.dra:
        if current != "false" and label not in prior:
            prior[label] = current
        edit.labels[label] = "false"
    elif label in prior:
        edit.labels[label] = prior.pop(label)


def _prior_labels_of_new(edit: NodeEdit, wanted: dict[str, str], ledger: Ledger) -> dict[str, str | None]:
    """Another controller's config labels (or their absence) that a joining node's new labels replace."""
    prior: dict[str, str | None] = {}
    for label in _CONFIG_LABELS:
        current = edit.label(label)
        want = wanted.get(label)
        absent_is_prior = label == conventions.MIG_CONFIG_LABEL and want == conventions.MIG_DISABLED_CONFIG
        replaced = (current is not None or absent_is_prior) and want is not None and current != want
        if replaced and not ledger.ours(current):
            prior[label] = current  # restored on release
    return prior


def _set_mig_label(
    edit: NodeEdit,
    original: NodeView,
    config: MemberConfig,
    prior: dict[str, str | None],
    ledger: Ledger,
    now: datetime,
    sync: ConfigSync | None,
) -> None:
    """The MIG config label (retried when failed; `sync`: held until the MIG manager can read a new one), and its
    state `pending` whenever the config changes.

    A joining node waits for its entry too, unlike for its device-plugin key: the MIG manager reports `failed`
    for an entry missing from its file and looks again only when the label changes (NVIDIA/mig-parted
    `cmd/nvidia-mig-manager/main.go`: the reconfigure loop waits in `SyncableMigConfig.Get`), which would cost
    the member a retry's backoff (`mig_retry`)."""
    mig_now = edit.label(conventions.MIG_CONFIG_LABEL)
    mig_want = mig_now
    if config.mig is not None:
        if sync is None or not _held(sync, sync.mig, mig_now, config.mig, ledger, now):
            mig_want = _mig_step(edit, original, config.mig, config, ledger, now)
    elif ledger.ours(mig_now):  # the pool no longer sets MIG: back to what the node had
        mig_want = prior.pop(conventions.MIG_CONFIG_LABEL, None) or conventions.MIG_DISABLED_CONFIG
    if mig_want != mig_now or config.mig is not None:
        edit.labels[conventions.MIG_CONFIG_LABEL] = mig_want
    if mig_want is not None and mig_want != original.labels.get(conventions.MIG_CONFIG_LABEL):
        edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = "pending"
    elif conventions.MIG_CONFIG_STATE_LABEL in edit.labels and mig_want == mig_now:
        del edit.labels[conventions.MIG_CONFIG_STATE_LABEL]


def _mig_step(
    edit: NodeEdit, original: NodeView, wanted: str, config: MemberConfig, ledger: Ledger, now: datetime
) -> str | None:
    """The MIG config label for a member that should be in `wanted`, retrying a failed or empty run."""
    step = mig_retry.next_step(original, wanted, now, unserved=_unserved(original, config))
    if step.rewrite_record:
        edit.annotations[conventions.MIG_RETRY_ANNOTATION] = step.record
    if step.event is not None:
        ledger.events.append(step.event)
    if step.requeue_after is not None:
        ledger.requeue(step.requeue_after)
    return step.label


def _held(
    sync: ConfigSync, seen: Mapping[str, datetime], current: str | None, wanted: str, ledger: Ledger, now: datetime
) -> bool:
    """Whether a member keeps its `current` config (or stays without one) this pass: `wanted` is another, and
    the kubelet may not have projected `wanted` into its pods yet (`ConfigSync`; `seen` is `sync.device_plugin`
    or `sync.mig`). The pass is requeued for when it may move."""
    if current == wanted:
        return False
    wait = sync.wait(seen, wanted, now)
    if wait <= 0:
        return False
    ledger.requeue(wait)
    return True


def _unserved(view: NodeView, config: MemberConfig) -> bool:
    """The member reports its MIG config applied but does not serve it: GFD says `-MIG-INVALID`, or the
    device plugin advertises other than exactly the pool's resources."""
    if view.labels.get(conventions.MIG_CONFIG_STATE_LABEL) != "success":
        return False
    product = view.labels.get(conventions.GFD_PRODUCT_LABEL) or ""
    if config.mig == conventions.MIG_DISABLED_CONFIG:  # MIG off: what the device plugin serves is not MIG's matter
        mig_devices = any(k.startswith("nvidia.com/mig-") and v not in ("", "0") for k, v in view.allocatable.items())
        return "-MIG-" in product or mig_devices
    if product.endswith(conventions.GFD_MIG_INVALID_SUFFIX):
        return True
    return bool(view.gpus) and nvidia.serving_difference(view.allocatable, view.gpus, config.per_gpu) is not None


@functools.lru_cache(maxsize=256)
def _prior_text(items: tuple[tuple[str, str | None], ...]) -> str:
    """The prior-labels annotation (JSON); members share a handful of them."""
    return json.dumps(dict(items), sort_keys=True)
