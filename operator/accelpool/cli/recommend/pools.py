"""Which existing ComputePools hold a workload, and how many replicas of it each can hold.

A pool offers units through its resources: whole devices (`nvidia.com/gpu`, `amd.com/gpu`, …),
MIG instances (`nvidia.com/mig-3g.40gb`, or `nvidia.com/gpu` under the single strategy) or shared
replicas (time-slicing, MPS). How many of each it offers now is its status' healthy capacity
(`status.capacity.resources`: what serving members advertise; quarantined, burn-in and NotReady
members count for nothing); a pool planned from a node snapshot offers what its planned members
will advertise once they serve (`planned_resources`).

A workload placed on whole devices takes the fewest of a node's devices that hold it (powers of
two, `fit.device_counts`), or whole nodes: replicas = serving nodes x (devices per node ÷ devices
needed), or serving nodes ÷ nodes needed. On a MIG instance or a shared replica it takes one unit
(a unit's memory: the profile's, or the device's divided by the replicas sharing it, as time-slicing
isolates no memory): replicas = units offered. A pool of parts that cannot run the request at all
(no mode in its dtype, or inference-only for a training workload: `fit.unsupported`) holds none.

On AMD MI250X a unit is one GCD (64 GB): what `amd.com/gpu` counts (the catalog's entry is per GCD).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import accelpool_api as api
from accelpool.cli.recommend.fit import USABLE, Kind, device_counts, fits, mig_memory_bytes, unsupported
from accelpool.cli.recommend.memory import Estimate, GiB
from accelpool_api import workloads
from accelpool_core import catalog


@dataclass(frozen=True)
class PoolUnits:
    """One resource a pool offers, what one unit of it holds, and how many it offers."""

    pool: str
    accelerator: catalog.Accelerator
    resource: str
    kind: Kind
    unit_bytes: float
    available: int
    per_node: int
    """The pool's devices per node (whole-device units)."""
    mig_profile: str | None = None
    shares: int = 1


@dataclass(frozen=True)
class PoolFit:
    pool: str
    accelerator: str
    resource: str
    fits: bool
    replicas: int
    units_per_replica: int
    available: int
    need_bytes: float
    unit_bytes: float
    why: str


def devices_per_node(spec: api.ComputePoolSpec, status: api.ComputePoolStatus | None) -> int:
    """The pool's `count`; else the serving members' average; else the catalog's largest node."""
    resolved = spec.resolve()
    if resolved.count:
        return resolved.count
    if status is not None and status.nodes.ready and status.capacity.gpus:
        return max(1, status.capacity.gpus // status.nodes.ready)
    return max(resolved.entry.detection.instance_types.values(), default=resolved.entry.default_count)


def member_devices(capacity: api.Capacity) -> int:
    """Every member's devices: serving, quarantined, in burn-in and unschedulable add up to them."""
    return (
        capacity.gpus
        + capacity.quarantined_gpus
        + capacity.burn_in_gpus
        + capacity.unschedulable_gpus
        + capacity.unconfigured_gpus
    )


def planned_resources(spec: api.ComputePoolSpec, gpus: int) -> dict[str, int]:
    """What `gpus` devices will advertise once their members serve: per GPU (`workloads.resources_per_gpu`) x GPUs."""
    return {name: count * gpus for name, count in workloads.resources_per_gpu(spec).items()}


def pool_units(name: str, spec: api.ComputePoolSpec, resources: Mapping[str, int], per_node: int) -> list[PoolUnits]:
    """The units of each resource the pool offers (`resources`: healthy or planned counts)."""
    entry = spec.resolve().entry
    layout = spec.mig_layout()
    units = []
    for resource, available in resources.items():
        if layout:
            profile = next((p for p in layout if catalog.mig_resource(p) == resource), layout[0])
            units.append(
                PoolUnits(name, entry, resource, Kind.MIG, mig_memory_bytes(profile), available, per_node, profile)
            )
        elif spec.sharing is not None:
            shares = spec.sharing.replicas
            units.append(
                PoolUnits(
                    name,
                    entry,
                    resource,
                    Kind.SHARED,
                    entry.memory_gb * GiB / shares,
                    available,
                    per_node,
                    None,
                    shares,
                )
            )
        else:
            units.append(PoolUnits(name, entry, resource, Kind.DEVICES, entry.memory_gb * GiB, available, per_node))
    return units


def fit_units(estimate: Estimate, units: PoolUnits) -> PoolFit:
    """How many replicas of the workload `units` can hold, or why none."""
    cannot = unsupported(estimate, units.accelerator)
    if cannot is not None:
        return _result(units, False, 0, 0, estimate.bytes_per_device(1), f"{units.accelerator.name}: {cannot}")
    if units.kind is not Kind.DEVICES:
        need = estimate.bytes_per_device(1)
        ok = fits(need, units.unit_bytes)
        why = (
            ""
            if ok
            else f"needs {need / GiB:,.1f} GiB; one {_unit_name(units)} holds {USABLE * units.unit_bytes / GiB:,.1f}"
        )
        return _result(units, ok, units.available if ok else 0, 1, need, why)
    serving_nodes = units.available // units.per_node
    for devices, nodes in device_counts(units.per_node):
        need = estimate.bytes_per_device(devices)
        if fits(need, units.unit_bytes):
            replicas = serving_nodes * (units.per_node // devices) if nodes == 1 else serving_nodes // nodes
            nodes_text = f"{nodes} nodes x {units.per_node}" if nodes > 1 else "one node"
            why = "" if replicas else f"a replica takes {devices} devices ({nodes_text}); {units.available} offered"
            return _result(units, True, replicas, devices, need, why)
    need = estimate.bytes_per_device(device_counts(units.per_node)[-1][0])
    return _result(units, False, 0, 0, need, "does not fit even across the most nodes tried")


def fit_pool(estimate: Estimate, units: list[PoolUnits]) -> PoolFit | None:
    """The pool's best resource for the workload: the most replicas, fitting ones first."""
    results = [fit_units(estimate, u) for u in units]
    return max(results, key=lambda r: (r.fits, r.replicas, -r.units_per_replica), default=None)


def _unit_name(units: PoolUnits) -> str:
    if units.kind is Kind.MIG:
        return f"MIG {units.mig_profile}"
    if units.kind is Kind.SHARED:
        return f"1/{units.shares} share of {units.accelerator.name}"
    return units.accelerator.name


def _result(units: PoolUnits, ok: bool, replicas: int, per_replica: int, need: float, why: str) -> PoolFit:
    return PoolFit(
        pool=units.pool,
        accelerator=units.accelerator.name,
        resource=units.resource,
        fits=ok,
        replicas=replicas,
        units_per_replica=per_replica,
        available=units.available,
        need_bytes=need,
        unit_bytes=units.unit_bytes,
        why=why,
    )
