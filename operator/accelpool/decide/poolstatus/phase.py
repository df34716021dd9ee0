"""A valid pool's phase, why it is in it, and the Ready condition that reports both.

Precedence: Pending (no members yet) / Provisioning (karpenter pools short of nodes) > Degraded
(`degradations`: unhealthy, quarantined, failed burn-in, MIG failed or overridden, not Ready,
cordoned, agents that cannot run, or short of nodes) > Configuring (`configuring`: MIG, device
plugin, agents or a passed burn-in not there yet) > Ready. A pool whose members are all in
burn-in is therefore Configuring (Provisioning while a Karpenter pool is short of nodes), never
Ready. Different driver versions across members do not change the phase (see
`accelpool.decide.poolstatus.drivers`). (Failed, for invalid pools, is decided by the composer.)
"""

from __future__ import annotations

from dataclasses import dataclass

from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.conditions import Finding
from accelpool.decide.poolstatus.facts import Phase, Selection, name_list
from accelpool.decide.poolstatus.layout import Layout
from accelpool_api import conventions


@dataclass(frozen=True)
class PhaseDecision:
    phase: Phase
    why: str

    def ready(self) -> Finding:
        """The Ready condition: True in phase Ready, else False with the phase as its reason."""
        is_ready = self.phase == "Ready"
        return Finding(is_ready, "Ready" if is_ready else self.phase, self.why)


def degradations(census: Census, layout: Layout, agents: Finding) -> list[str]:
    """What keeps members from serving, worst first (any makes the pool Degraded)."""
    found: list[str] = []
    if layout.overridden:
        found.append(f"MIG strategy overridden on {len(layout.overridden)}")
    if census.quarantined:
        found.append(f"{len(census.quarantined)} quarantined")
    if census.unhealthy:
        found.append(f"{len(census.unhealthy)} unhealthy")
    if census.burn_in_failed:
        found.append(f"{len(census.burn_in_failed)} failed burn-in ({name_list(census.burn_in_failed)})")
    if layout.failed:
        found.append(f"MIG failed on {len(layout.failed)}")
    if census.not_ready:
        found.append(f"{len(census.not_ready)} not Ready ({name_list(census.not_ready)})")
    if census.cordoned:
        found.append(f"{len(census.cordoned)} cordoned ({name_list(census.cordoned)})")
    if not agents.ok and agents.reason != "WaitingForAgents" and census.members:
        found.append(f"agents cannot run ({agents.reason})")
    return found


def configuring(
    census: Census, layout: Layout, *, nvidia_pool: bool, device_plugin_written: bool, dra: bool = False
) -> list[str]:
    """What is still on its way (any makes a pool that is not Degraded Configuring)."""
    found: list[str] = []
    if layout.pending:
        found.append(f"MIG pending on {len(layout.pending)}")
    if layout.not_advertised:
        found.append(f"layout not advertised on {len(layout.not_advertised)}")
    if layout.not_served and dra:
        found.append(f"NVIDIA's device plugin still advertises GPUs on {len(layout.not_served)}")
    elif layout.not_served:
        found.append(f"device plugin config not served on {len(layout.not_served)}")
    if nvidia_pool and (census.device_plugin_missing or not device_plugin_written):
        found.append("device plugin config pending")
    if census.silent:
        found.append(f"{len(census.silent)} agents not reporting")
    if census.waiting_health:
        found.append(f"{len(census.waiting_health)} health Unknown")
    pending = [m for m in census.burn_in if m.burn_in != conventions.BURN_IN_FAILED]
    if pending:
        found.append(f"{len(pending)} in burn-in ({name_list(pending)})")
    return found


def decide_phase(
    selection: Selection,
    census: Census,
    nodes_selected: Finding,
    degraded: list[str],
    pending: list[str],
) -> PhaseDecision:
    """The phase from how many members there are (`nodes_selected` explains a shortfall) and what
    `degradations` and `configuring` found."""
    members, desired = len(census.members), selection.desired
    enough = members >= desired
    if desired > 0 and not members:
        return PhaseDecision("Provisioning" if selection.karpenter else "Pending", nodes_selected.message)
    if selection.karpenter and not enough:
        return PhaseDecision("Provisioning", nodes_selected.message)
    if degraded or not enough:
        return PhaseDecision("Degraded", "; ".join(degraded) if degraded else nodes_selected.message)
    if pending:
        return PhaseDecision("Configuring", "; ".join(pending))
    return PhaseDecision("Ready", f"{len(census.ready)} of {desired} nodes ready")
