"""How NVIDIA's components serve an NVIDIA pool on each member, judged from what the members publish.

`nvidia.com/mig.config.state=success` alone does not prove a layout exists: mig-parted reports
success for an entry that creates nothing, and a label changed mid-run can get `success` for the
previous config. So `judge_layout` counts a member as done only when the device plugin advertises
exactly the pool's resources (`status.allocatable`: per resource, per GPU, nothing more and
nothing less), GFD does not call the layout `-MIG-INVALID`, and GFD runs the strategy the pool's
config sets (`nvidia.com/mig.strategy`). The MigConfigured and DevicePluginConfigured conditions,
the phase and the capacity read the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import accelpool_api as api
from accelpool.decide.poolstatus.facts import Member
from accelpool.model import nvidia
from accelpool_api import conventions, workloads
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
    device_plugin: bool = field(init=False, compare=False)
    """NVIDIA's device plugin serves the GPUs (allocation DevicePlugin), not its DRA driver."""
    key: str = field(init=False, compare=False)
    """The pool's device-plugin config key (named by its content; "" for other vendors)."""
    mig_config: str = field(init=False, compare=False)
    """The mig-parted config members should be in: the pool's own entry (named by its content), or `all-disabled`."""

    def __post_init__(self) -> None:
        entry = self.resolved.entry
        mig = self.spec.mig is not None
        configs = nvidia.member_configs(self.name, self.spec, self.resolved)
        set_field = object.__setattr__
        set_field(self, "entry", entry)
        set_field(self, "nvidia", entry.vendor == catalog.Vendor.NVIDIA)
        set_field(self, "device_plugin", self.spec.allocation == "DevicePlugin")
        set_field(self, "mig", mig)
        set_field(self, "uses_mig_label", mig or entry.mig_capable)
        set_field(self, "key", configs.device_plugin or "")
        set_field(self, "mig_config", configs.mig or conventions.MIG_DISABLED_CONFIG)

    def resources_per_gpu(self) -> dict[str, int]:
        return workloads.resources_per_gpu(self.spec, self.resolved)


@dataclass(frozen=True)
class Layout:
    """Where each member stands with the pool's NVIDIA config."""

    done: frozenset[str] = frozenset()
    """Members that serve exactly the pool's config: its MIG config (the pool's layout, or MIG off) in
    place, and exactly the pool's resources advertised (per resource, per GPU)."""
    failed: tuple[Member, ...] = ()
    pending: tuple[Member, ...] = ()
    overridden: tuple[tuple[Member, str], ...] = ()
    """Members whose GFD runs another MIG strategy than the pool's config sets (member, GFD's strategy)."""
    not_advertised: tuple[tuple[Member, str], ...] = ()
    """Members the MIG manager reports `success` for, but whose advertised devices or GFD labels say
    another MIG layout (member, why)."""
    not_served: tuple[tuple[Member, str], ...] = ()
    """Members whose MIG config is in place (or that need none) but whose device plugin does not
    advertise exactly the pool's resources yet (member, why): a reload not done, another config's
    replicas."""


def judge_layout(members: Sequence[Member], shape: PoolShape, per_gpu: Mapping[str, int]) -> Layout:
    """Per member: is the pool's MIG config (or MIG off) applied, and does the node advertise exactly what it should?

    MIG off counts only on the MIG manager's word (`success` for `all-disabled`), with whole GPUs
    advertised, no MIG resources, and GFD's plain product label (neither `-MIG-<profile>` nor
    `-MIG-INVALID`): under the none and single strategies a MIG-enabled GPU's devices are advertised
    as `nvidia.com/gpu` too, so a count alone does not prove MIG is off.
    """
    strategy = shape.spec.mig_strategy()
    mig_pool = shape.mig
    wanted = shape.mig_config
    done: set[str] = set()
    failed: list[Member] = []
    pending: list[Member] = []
    overridden: list[tuple[Member, str]] = []
    not_advertised: list[tuple[Member, str]] = []
    not_served: list[tuple[Member, str]] = []
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
        difference = advertised_difference(m, per_gpu)
        if not uses_mig_label:
            if difference is None:
                done.add(m.name)
            else:
                not_served.append((m, difference))
            continue
        product = m.label(conventions.GFD_PRODUCT_LABEL) or ""
        if state == "failed":
            failed.append(m)
        elif state != "success":
            pending.append(m)
        elif mig_pool and product.endswith(conventions.GFD_MIG_INVALID_SUFFIX):
            not_advertised.append((m, f"is labelled {conventions.GFD_PRODUCT_LABEL}={product} by GFD"))
        elif not mig_pool and "-MIG-" in product:
            not_advertised.append((m, f"is labelled {conventions.GFD_PRODUCT_LABEL}={product} by GFD (MIG still on)"))
        elif not mig_pool and (mig := _mig_resources(m)):
            not_advertised.append((m, f"advertises {mig} (MIG still on)"))
        elif difference is not None:
            (not_advertised if mig_pool else not_served).append((m, difference))
        else:
            done.add(m.name)
    return Layout(
        frozenset(done), tuple(failed), tuple(pending), tuple(overridden), tuple(not_advertised), tuple(not_served)
    )


def advertised(member: Member, resource: str) -> int:
    """What the member's device plugin advertises of a resource now (`status.allocatable`)."""
    value = member.view.allocatable.get(resource, "")
    return int(value) if value.isdigit() else 0


def advertised_difference(member: Member, per_gpu: Mapping[str, int]) -> str | None:
    """How what the member's device plugin advertises differs from exactly the pool's config, or None."""
    gpus = member.view.gpus
    if not gpus:
        return None  # the node's GPU count is unknown: nothing to compare with
    return nvidia.serving_difference(member.view.allocatable, gpus, per_gpu)


def _mig_resources(member: Member) -> str:
    """The MIG resources the member advertises (mixed strategy), e.g. `nvidia.com/mig-1g.10gb=56`."""
    found = [
        f"{name}={value}"
        for name, value in sorted(member.view.allocatable.items())
        if name.startswith(_MIG_RESOURCE_PREFIX) and value.isdigit() and int(value) > 0
    ]
    return ", ".join(found)


_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
