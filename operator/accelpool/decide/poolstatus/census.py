"""A valid pool's members sorted into the groups its conditions, phase and counts speak of.

`Census.take` walks the members (given in name order) once per group, so every condition
function reads the same groups instead of filtering the members again; each group keeps the order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelpool.decide.poolstatus.facts import Member
from accelpool.decide.poolstatus.layout import Layout, PoolShape
from accelpool_api import conventions


@dataclass(frozen=True)
class Census:
    """The members (in name order) and the groups of them that the status names or counts."""

    members: tuple[Member, ...]
    quarantined: tuple[Member, ...]
    """Tainted `accelpool.io/quarantined`, or cordoned by accelpool."""
    unhealthy: tuple[Member, ...]
    """AcceleratorHealthy False and not (yet) quarantined."""
    not_ready: tuple[Member, ...]
    cordoned: tuple[Member, ...]
    """Unschedulable for another reason than a quarantine."""
    silent: tuple[Member, ...]
    """Without a live AcceleratorHealthy condition from this pool's agent."""
    waiting_health: tuple[Member, ...]
    """AcceleratorHealthy Unknown where the agent can verify the devices (it has not decided yet)."""
    healthy: int
    """Members whose AcceleratorHealthy is True."""
    device_plugin_missing: tuple[Member, ...]
    """Members of an NVIDIA pool that do not select the pool's device-plugin config yet."""
    burn_in: tuple[Member, ...]
    """Tainted `accelpool.io/burn-in` (joined, not passed burn-in yet), failed ones included."""
    burn_in_failed: tuple[Member, ...]
    """In burn-in with the taint's value `failed`: AcceleratorHealthy turned False before it passed."""
    serving: tuple[Member, ...]
    """Ready, schedulable, not quarantined and not in burn-in."""
    configured: tuple[Member, ...]
    """Serving and, in an NVIDIA pool, serving exactly the pool's config (`Layout.done`): what pods can use
    now (capacity counts these)."""
    ready: tuple[Member, ...]
    """Serving, configured (NVIDIA pools: `Layout.done`) and healthy, whatever the vendor."""

    @classmethod
    def take(cls, members: Sequence[Member], shape: PoolShape, layout: Layout) -> Census:
        members = tuple(members)
        nvidia_pool = shape.nvidia
        key = shape.key
        serving = [
            m for m in members if m.view.ready and not m.unschedulable and not m.quarantined and m.burn_in is None
        ]
        burn_in = [m for m in members if m.burn_in is not None]
        configured = [m for m in serving if m.name in layout.done] if nvidia_pool else serving
        ready = [m for m in configured if m.view.health is not None and m.view.health.healthy]
        return cls(
            members=members,
            quarantined=tuple([m for m in members if m.quarantined]),
            unhealthy=tuple(
                [m for m in members if not m.quarantined and m.view.health is not None and m.view.health.unhealthy]
            ),
            not_ready=tuple([m for m in members if not m.view.ready]),
            cordoned=tuple([m for m in members if m.unschedulable and not m.quarantined]),
            silent=tuple([m for m in members if m.view.health is None or m.view.health.silent]),
            waiting_health=tuple(
                [
                    m
                    for m in members
                    if m.view.health is not None and not m.view.health.healthy and not m.view.health.unhealthy
                ]
            ),
            healthy=len([m for m in members if m.view.health is not None and m.view.health.healthy]),
            device_plugin_missing=tuple(
                [
                    m
                    for m in members
                    if nvidia_pool and shape.device_plugin and m.label(conventions.DEVICE_PLUGIN_CONFIG_LABEL) != key
                ]
            ),
            burn_in=tuple(burn_in),
            burn_in_failed=tuple([m for m in burn_in if m.burn_in == conventions.BURN_IN_FAILED]),
            serving=tuple(serving),
            configured=tuple(configured),
            ready=tuple(ready),
        )
