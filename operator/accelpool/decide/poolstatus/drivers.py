"""Whether a pool's members run one accelerator driver: the DriversConsistent condition.

Each member's agent reports the driver's version and the CUDA version it supports
(`HealthReport.driver_version`, `cuda_version`). Members on different versions can give one
job different numerical results, kernels or NCCL behaviour, so a pool whose members disagree is
`DriversConsistent=False/DriverVersionMismatch`, naming each version and the members on the
minority ones (a Warning Event says it too). It quarantines nothing and does not change the
phase: every member still serves, and an upgrade rolling through a pool passes through a
mismatch on purpose. Only reports written by this pool's agent count (a report left by another
pool's agent says nothing of this pool's driver); where none reports one, nothing disagrees
(True, NotReported), so agents that do not report versions never turn the condition Unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from accelpool.decide.poolstatus.conditions import Finding
from accelpool.decide.poolstatus.facts import MESSAGE_NODES, Member, name_list


def driver_versions(members: Sequence[Member], pool: str) -> dict[str, tuple[Member, ...]]:
    """The members that report a driver version, by `driver <version> (CUDA <version>)`, most members first."""
    found: dict[str, list[Member]] = defaultdict(list)
    for member in members:
        report = member.view.report
        if report is None or report.driver_version is None or report.pool not in (None, pool):
            continue
        cuda = f" (CUDA {report.cuda_version})" if report.cuda_version else ""
        found[f"driver {report.driver_version}{cuda}"].append(member)
    ordered = sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
    return {version: tuple(holders) for version, holders in ordered}


def drivers_consistent(members: Sequence[Member], pool: str) -> Finding:
    """True when every reporting member runs one driver and CUDA version; False naming the minority's nodes."""
    versions = driver_versions(members, pool)
    if not versions:
        return Finding(True, "NotReported", "no member reports its driver version: nothing disagrees")
    reporting = sum(len(holders) for holders in versions.values())
    (common, majority), *others = versions.items()
    if not others:
        return Finding(True, "Consistent", f"{common} on {reporting} of {len(members)} members")
    minority = "; ".join(f"{version} on {name_list(holders)}" for version, holders in others[:MESSAGE_NODES])
    more = f"; and {len(others) - MESSAGE_NODES} more versions" if len(others) > MESSAGE_NODES else ""
    return Finding(
        False,
        "DriverVersionMismatch",
        f"members run {len(versions)} driver versions: {common} on {len(majority)} of {reporting}; {minority}{more}",
    )
