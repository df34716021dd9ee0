"""The composer: a pool's whole `status` from its `PoolFacts`, one condition function at a time.

`compute_status` judges the NVIDIA layout (`layout`), sorts the members (`census`), asks each
condition function (`conditions`) and the phase (`phase`) for its finding, and assembles the
conditions (in `CONDITION_TYPES` order), counts, capacity, scheduling and members. An invalid
or unplannable pool gets `invalid_status` (Valid and Ready False, phase Failed). A condition's
`lastTransitionTime` is carried over from the previous status while its status does not change.
"""

from __future__ import annotations

from datetime import datetime

import accelpool_api as api
from accelpool.decide.poolstatus import capacity, conditions, drivers, phase
from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.conditions import Finding
from accelpool.decide.poolstatus.facts import ConditionStatus, PoolFacts
from accelpool.decide.poolstatus.layout import Layout, PoolShape, judge_layout
from accelpool.model.nodes import format_time
from accelpool_api import conventions, workloads


class ConditionHistory:
    """Turns findings into conditions, keeping `lastTransitionTime` while a condition's status holds."""

    def __init__(self, previous: api.ComputePoolStatus | None, now: datetime, generation: int | None) -> None:
        self._previous = {c.type: c for c in (previous.conditions if previous else [])}
        self._now = format_time(now)
        self._generation = generation

    def condition(self, type_: str, finding: Finding) -> api.Condition:
        ok = finding.ok
        status: ConditionStatus = "Unknown" if ok is None else "True" if ok else "False"
        before = self._previous.get(type_)
        since = before.last_transition_time if before and before.status == status else None
        if (
            since is not None
            and before is not None
            and (before.reason, before.message, before.observed_generation)
            == (finding.reason, finding.message, self._generation)
        ):
            return before  # the same condition: a steady pool's status is built of the last one's parts
        return api.Condition(
            type=type_,
            status=status,
            reason=finding.reason,
            message=finding.message,
            last_transition_time=since or self._now,
            observed_generation=self._generation,
        )


def invalid_status(facts: PoolFacts) -> api.ComputePoolStatus:
    """Phase Failed: the operator changes nothing for a pool whose spec is invalid or cannot be planned."""
    history = ConditionHistory(facts.previous, facts.now, facts.generation)
    what = "the pool cannot be planned; the operator changes nothing for it"
    if not facts.unplannable:
        what = "the spec is invalid; the operator changes nothing for this pool"
    members = [api.Member(node=m.name, gpus=m.view.gpus) for m in facts.members[: api.MAX_STATUS_MEMBERS]]
    omitted = len(facts.members) - len(members)
    return api.ComputePoolStatus(
        observed_generation=facts.generation,
        phase="Failed",
        selector=f"{conventions.POOL_LABEL}={facts.name}",
        nodes=api.NodeCounts(members=len(facts.members), summary=f"{len(facts.members)}/0"),
        members=members,
        members_omitted=omitted or None,
        conditions=[
            history.condition("Valid", conditions.invalid(facts.problems, unplannable=facts.unplannable)),
            history.condition("Ready", Finding(False, "Failed", what)),
        ],
    )


def compute_status(facts: PoolFacts) -> api.ComputePoolStatus:
    """The status of a pool (`invalid_status` when its spec is missing or has problems)."""
    spec = facts.spec
    if spec is None or facts.problems:
        return invalid_status(facts)
    shape = PoolShape(facts.name, spec, facts.resolved or spec.resolve())
    per_gpu = shape.resources_per_gpu()
    in_name_order = tuple(sorted(facts.members, key=lambda m: m.name))
    layout = judge_layout(in_name_order, shape, per_gpu) if shape.nvidia else Layout()
    census = Census.take(in_name_order, shape, layout)
    members = len(census.members)
    selection = facts.selection
    selected = conditions.nodes_selected(facts.name, selection, members, shape.resolved.display)
    agents = conditions.agent_ready(facts.agents, census, facts.now)
    decision = phase.decide_phase(
        selection,
        census,
        selected,
        degraded=phase.degradations(census, layout, agents),
        pending=phase.configuring(
            census,
            layout,
            nvidia_pool=shape.nvidia and shape.device_plugin,
            device_plugin_written=facts.device_plugin_written,
            dra=not shape.device_plugin,
        ),
    )
    findings = {
        "Valid": conditions.valid(shape.resolved.display, selection.desired),
        "NodesSelected": selected,
        "MigConfigured": conditions.mig_configured(shape, layout, members),
        "DevicePluginConfigured": conditions.device_plugin_configured(
            shape, layout, census.device_plugin_missing, members, written=facts.device_plugin_written
        ),
        "AgentReady": agents,
        "Healthy": conditions.healthy(facts.breaker, census),
        "DriversConsistent": drivers.drivers_consistent(census.members, facts.name),
        "Ready": decision.ready(),
    }
    history = ConditionHistory(facts.previous, facts.now, facts.generation)
    return api.ComputePoolStatus(
        observed_generation=facts.generation,
        phase=decision.phase,
        accelerator=shape.resolved.display,
        selector=f"{conventions.POOL_LABEL}={facts.name}",
        nodes=api.NodeCounts(
            desired=selection.desired,
            members=members,
            ready=len(census.ready),
            quarantined=len(census.quarantined),
            burn_in=len(census.burn_in),
            draining=sum(
                1 for m in census.quarantined if m.remediation is not None and m.remediation.step == "draining"
            ),
            handed_off=sum(
                1 for m in census.quarantined if m.remediation is not None and m.remediation.step == "handed-off"
            ),
            summary=f"{members}/{selection.desired}",
        ),
        capacity=capacity.capacity(census, shape.entry, per_gpu, spec.health.matmul.dtype),
        scheduling=api.Scheduling(
            node_selector={conventions.POOL_LABEL: facts.name},
            tolerations=workloads.scheduling_tolerations(
                facts.name, spec.dedicated, (t for m in census.members for t in m.taints)
            ),
        ),
        members=capacity.status_members(
            census.members, mig_pool=shape.mig, previous=facts.previous.members if facts.previous else ()
        ),
        members_omitted=max(0, len(census.members) - api.MAX_STATUS_MEMBERS) or None,
        conditions=[history.condition(type_, findings[type_]) for type_ in conditions.CONDITION_TYPES],
    )
