"""What a pool offers pods, and the per-member lines of its status.

- `capacity`: what serving members offer (GPUs, memory, the device plugin's advertised
  resources, measured matmul TFLOPS), counting only members that serve the pool's NVIDIA config
  exactly, and the GPUs of quarantined, burn-in, unconfigured and unschedulable members apart.
- `status_members`: each member's health, reason, MIG state and TFLOPS, bounded in number (`listed_members`:
  those that need attention first; the status counts the rest in `membersOmitted`).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence

import accelpool_api as api
from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.facts import Member, MemberHealth, health_reason
from accelpool.decide.poolstatus.layout import advertised
from accelpool.model.nodes import format_time
from accelpool_api import conventions
from accelpool_core import catalog


def capacity(census: Census, entry: catalog.Accelerator, per_gpu: Mapping[str, int], dtype: str) -> api.Capacity:
    """What the serving members offer, and the devices of the others by why they cannot serve.

    Only members that serve the pool's config exactly count (`Census.configured`): a member whose MIG
    layout or device-plugin config is not in place yet offers nothing the pool promises. Memory falls
    back to the catalog's per-device figure where the node does not publish its own.
    """
    serving = census.configured
    memory_gib = 0.0
    for m in serving:
        detected = m.view.detected
        if detected is None:
            continue
        per_device = detected.memory_mib / 1024 if detected.memory_mib else entry.memory_gb
        memory_gib += detected.count * per_device
    resources = {name: sum(advertised(m, name) for m in serving) for name in per_gpu}
    measured = [
        m.view.report.tflops
        for m in serving
        if m.view.report is not None and m.view.report.tflops is not None and (m.view.report.dtype in (None, dtype))
    ]
    quarantined = sum(m.view.gpus for m in census.quarantined)
    burn_in = sum(m.view.gpus for m in census.burn_in if not m.quarantined)
    everyone = sum(m.view.gpus for m in census.members)
    gpus = sum(m.view.gpus for m in serving)
    unconfigured = sum(m.view.gpus for m in census.serving) - gpus
    return api.Capacity(
        gpus=gpus,
        memory_gib=round(memory_gib),
        resources=resources,
        measured_tflops=round(sum(measured), 1) if measured else None,
        quarantined_gpus=quarantined,
        burn_in_gpus=burn_in,
        unconfigured_gpus=unconfigured,
        unschedulable_gpus=everyone - gpus - quarantined - burn_in - unconfigured,
    )


def listed_members(members: Sequence[Member]) -> tuple[list[Member], int]:
    """The members `status.members` lists (at most `api.MAX_STATUS_MEMBERS`, those that are not Healthy before the
    others, in the given order) and how many it leaves out. In a large pool the few that need attention are the
    ones a reader looks for: a quarantined node is never left out for a healthy one."""
    if len(members) <= api.MAX_STATUS_MEMBERS:
        return list(members), 0
    attention = [m for m in members if _needs_attention(m)]
    chosen = {id(m) for m in attention[: api.MAX_STATUS_MEMBERS]}
    for m in members:
        if len(chosen) >= api.MAX_STATUS_MEMBERS:
            break
        chosen.add(id(m))
    return [m for m in members if id(m) in chosen], len(members) - len(chosen)


def _needs_attention(member: Member) -> bool:
    """Not Healthy in the status: quarantined, in burn-in, or its condition not True (`member_health`)."""
    health = member.view.health
    return member.quarantined or member.burn_in is not None or health is None or not health.healthy


MEMBER_FIELDS = ("gpus", "health", "reason", "since", "mig", "tflops", "step", "action")
"""`api.Member`'s fields besides `node`, in the order `status_members` computes them."""
_member_values = operator.attrgetter(*MEMBER_FIELDS)


def status_members(
    members: Sequence[Member], *, mig_pool: bool, previous: Sequence[api.Member] = ()
) -> list[api.Member]:
    """The members the status lists (`listed_members`; counts cover all); an entry the same as in the `previous`
    status is that entry (a steady pool's status is built of the last one's parts)."""
    before = {m.node: m for m in previous}
    listed = []
    for m in listed_members(members)[0]:
        health, reason, since = member_health(m)
        report = m.view.report
        ladder = m.remediation if m.quarantined else None
        values = (
            m.view.gpus,
            health,
            reason,
            since,
            m.mig_state if mig_pool else None,
            report.tflops if report is not None else None,
            ladder.step if ladder is not None else None,
            ladder.action.value if ladder is not None else None,
        )
        old = before.get(m.name)
        if old is not None and _member_values(old) == values:
            listed.append(old)
        else:
            listed.append(api.Member.model_validate({"node": m.name, **dict(zip(MEMBER_FIELDS, values, strict=True))}))
    return listed


def member_health(member: Member) -> tuple[MemberHealth, str | None, str | None]:
    """(health, reason, since) of one member, the first that applies: Quarantined, Unhealthy, BurnIn, Healthy,
    Unknown (why not reported)."""
    view = member.view
    since = format_time(view.health.since) if view.health and view.health.since else None
    if member.quarantined:
        return "Quarantined", health_reason(view), since
    if view.health is not None and view.health.unhealthy:
        return "Unhealthy", health_reason(view), since
    if member.burn_in is not None:
        return "BurnIn", "BurnInFailed" if member.burn_in == conventions.BURN_IN_FAILED else "BurnInPending", since
    if view.health is not None and view.health.healthy:
        return "Healthy", None, since
    return "Unknown", (view.health.reason or None) if view.health else "NotReported", since
