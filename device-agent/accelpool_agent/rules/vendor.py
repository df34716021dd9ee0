"""Each vendor backend's own health rules, adapted to one call the agent's state makes per device.

The generic telemetry rules (`rules.telemetry_checks`) read NVIDIA's signals (XIDs, row remapping,
NVLink, ...). A vendor backend's devices are judged by its vendor's rules as well: `rules.amd.amd_checks`
(amdsmi events in the XID record, ECC against the first reading), `rules.neuron.neuron_checks` (error
counters' rates over the window, from `rules.neuron.neuron_counters`) and `rules.tpu.tpu_checks`. Each
vendor result replaces the generic result of the same `Check`; a vendor result of a check the generic
rules lack is added. AWS Neuron's and Google TPU's devices have no compute checks (`VendorRules.compute`):
a portable kernel there needs the vendor's framework and a compiled model (Neuron) or JAX (TPU) in the
agent's image, so their verdict rests on the counters and readings alone; on NVIDIA and AMD a backend that
cannot compute leaves the node Unknown (`ChecksSkipped`), since compute checks are their design.
`for_backend` picks the rules by backend name; NVIDIA's, the fake's and the CPU's
devices are judged by the generic rules alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from accelpool_agent.model import CheckResult, EccCounts, Telemetry
from accelpool_agent.rules import amd, neuron, tpu
from accelpool_agent.rules.policy import Policy
from accelpool_agent.rules.telemetry import XidRecord


@dataclass(frozen=True)
class DeviceFacts:
    """What a vendor's rules may read about one device."""

    telemetry: Telemetry | None
    events: XidRecord
    """The backend's error events (`drain_xid_events`: amdsmi's event codes on AMD)."""
    first_ecc: EccCounts | None
    counter_rates: Mapping[str, float]
    """Per-minute rates of the vendor's counters (`VendorRules.counters`) over the rate window."""
    now: float
    policy: Policy


@dataclass(frozen=True)
class VendorRules:
    checks: Callable[[DeviceFacts], Sequence[CheckResult]]
    counters: Callable[[Telemetry], Mapping[str, int]] | None = None
    """The monotonic counters whose rates `checks` reads, kept in a window per device; None: none."""
    compute: bool = True
    """Whether compute checks are part of this vendor's verdict (False: they do not apply, and a device is
    judged by `checks` and the generic telemetry rules alone)."""


def _amd(facts: DeviceFacts) -> Sequence[CheckResult]:
    return amd.amd_checks(facts.telemetry, facts.events, baseline=facts.first_ecc, now=facts.now, policy=facts.policy)


def _neuron(facts: DeviceFacts) -> Sequence[CheckResult]:
    return neuron.neuron_checks(facts.telemetry, rates=facts.counter_rates, now=facts.now)


def _tpu(facts: DeviceFacts) -> Sequence[CheckResult]:
    return [replace(result, finished_at=facts.now) for result in tpu.tpu_checks(facts.telemetry)]


BY_BACKEND: Mapping[str, VendorRules] = {
    "amdsmi": VendorRules(_amd),
    "neuron": VendorRules(_neuron, counters=neuron.neuron_counters, compute=False),
    "tpu": VendorRules(_tpu, compute=False),
}


def for_backend(backend: str) -> VendorRules | None:
    """The vendor rules of a backend, or None where the generic rules are all."""
    return BY_BACKEND.get(backend)


def merged(generic: Sequence[CheckResult], vendor: Sequence[CheckResult]) -> list[CheckResult]:
    """The generic results, each replaced by the vendor's result of the same `Check`, then the vendor's
    results of checks the generic rules do not have."""
    theirs = {result.check: result for result in vendor}
    kept = [theirs.pop(result.check, result) for result in generic]
    return [*kept, *theirs.values()]
