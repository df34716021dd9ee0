"""How NVIDIA's components serve an NVIDIA pool on each member, judged from what the members publish.

`nvidia.com/mig.config.state=success` alone does not prove a layout exists: mig-parted reports
success for an entry that creates nothing, and a label changed mid-run can get `success` for the
previous config. So `judge_layout` counts a member as done only when the device plugin
advertises the pool's resources (`status.allocatable`), GFD does not call the layout
`-MIG-INVALID`, and GFD runs the strategy the pool's config sets (`nvidia.com/mig.strategy`).
The MigConfigured and DevicePluginConfigured conditions and the phase read the result. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from accelpool import api, conventions, nvidia
from accelpool.poolstatus.facts import Member
from accelpool_core import catalog


@dataclass(frozen=True)
class PoolShape:
    """What a valid pool's spec means for its members' NVIDIA labels and advertised resources.

    The derived facts are computed once, at creation: every condition of every pool reads them.
    """

    name: str
    spec: api.ComputePoolSpec
    resolved: api.ResolvedAccelerator
    entry: catalog.Accelerator = field(init=False, compare=False)
    nvidia: bool = field(init=False, compare=False)
    mig: bool = field(init=False, compare=False)
    """The pool partitions its GPUs with MIG."""
    uses_mig_label: bool = field(init=False, compare=False)
    """Members carry `nvidia.com/mig.config`: the pool's layout, or MIG off on MIG-capable GPUs."""
    key: str = field(init=False, compare=False)
    """The pool's device-plugin config key and mig-parted entry name."""
    mig_config: str = field(init=False, compare=False)
    """The mig-parted config members should be in: the pool's own, or `all-disabled`."""

    def __post_init__(self) -> None:
        entry = self.resolved.entry
        mig = self.spec.mig is not None
        key = conventions.config_name(self.name)
        set_field = object.__setattr__
        set_field(self, "entry", entry)
        set_field(self, "nvidia", entry.vendor == catalog.Vendor.NVIDIA)
        set_field(self, "mig", mig)
        set_field(self, "uses_mig_label", mig or entry.mig_capable)
        set_field(self, "key", key)
        set_field(self, "mig_config", key if mig else conventions.MIG_DISABLED_CONFIG)

    def resources_per_gpu(self) -> dict[str, int]:
        return nvidia.resources_per_gpu(self.spec, self.resolved)


@dataclass(frozen=True)
class Layout:
    """Where each member stands with the pool's NVIDIA config."""

    done: frozenset[str] = frozenset()
    """Members whose MIG config (the pool's layout, or MIG off) is in place and advertised as expected."""
    failed: tuple[Member, ...] = ()
    pending: tuple[Member, ...] = ()
    overridden: tuple[tuple[Member, str], ...] = ()
    """Members whose GFD runs another MIG strategy than the pool's config sets (member, GFD's strategy)."""
    not_advertised: tuple[tuple[Member, str], ...] = ()
    """Members the MIG manager reports `success` for, but whose advertised devices say otherwise (member, why)."""


def judge_layout(members: Sequence[Member], shape: PoolShape, per_gpu: Mapping[str, int]) -> Layout:
    """Per member: is the pool's MIG config (or MIG off) applied, and does the node advertise what it should?"""
    strategy = shape.spec.mig_strategy()
    mig_pool = shape.mig
    wanted = shape.mig_config
    done: set[str] = set()
    failed: list[Member] = []
    pending: list[Member] = []
    overridden: list[tuple[Member, str]] = []
    not_advertised: list[tuple[Member, str]] = []
    mps = shape.spec.sharing is not None and shape.spec.sharing.mode == "mps"
    uses_mig_label = shape.uses_mig_label
    for m in members:
        # GFD's label says the strategy it and the plugin run with; judged once the layout is applied (during a
        # change it may still describe the previous config). Whole GPUs are served alike by none, single, mixed.
        gfd_strategy = m.label(conventions.GFD_MIG_STRATEGY_LABEL)
        config = m.label(conventions.MIG_CONFIG_LABEL) if uses_mig_label else None
        state = m.mig_state if config == wanted else None
        if gfd_strategy is not None and (
            (mig_pool and state == "success" and gfd_strategy != strategy) or (mps and gfd_strategy == "mixed")
        ):
            overridden.append((m, gfd_strategy))
            continue
        missing = advertised_shortfall(m, per_gpu)
        if not uses_mig_label:
            if missing is None:
                done.add(m.name)
            else:
                not_advertised.append((m, missing))
            continue
        product = (m.label(conventions.GFD_PRODUCT_LABEL) or "") if mig_pool else ""
        if state == "failed":
            failed.append(m)
        elif product.endswith(conventions.GFD_MIG_INVALID_SUFFIX):
            not_advertised.append((m, f"is labelled {conventions.GFD_PRODUCT_LABEL}={product} by GFD"))
        elif state == "success" and missing is not None:
            not_advertised.append((m, missing))
        elif state == "success" or (not mig_pool and config == wanted and missing is None):
            done.add(m.name)  # MIG off is also proven by whole GPUs advertised without a MIG manager's word
        else:
            pending.append(m)
    return Layout(frozenset(done), tuple(failed), tuple(pending), tuple(overridden), tuple(not_advertised))


def advertised(member: Member, resource: str) -> int:
    """What the member's device plugin advertises of a resource now (`status.allocatable`)."""
    value = member.view.allocatable.get(resource, "")
    return int(value) if value.isdigit() else 0


def advertised_shortfall(member: Member, per_gpu: Mapping[str, int]) -> str | None:
    """What the member's device plugin advertises short of the pool's config, or None when all is there."""
    gpus = member.view.gpus
    if not gpus:
        return None  # the node's GPU count is unknown: nothing to compare with
    short = []
    for resource, count in per_gpu.items():
        have, want = advertised(member, resource), count * gpus
        if have < want:
            short.append(f"{resource}={have} of {want}")
    return f"advertises {', '.join(short)}" if short else None
