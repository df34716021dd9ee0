"""A vendor rules module as `backends.VENDOR_RULES` names them, for the agent's wiring tests: it fails the
ECC check of device 1 whatever the generic rule said."""

from __future__ import annotations

from collections.abc import Sequence

from accelpool_agent.model import Check, CheckResult, CheckStatus, DeviceInfo, Telemetry


def example_checks(device: DeviceInfo, telemetry: Telemetry | None, now: float) -> Sequence[CheckResult]:
    if device.index != 1 or telemetry is None:
        return []
    return [CheckResult(Check.ECC, CheckStatus.FAIL, "VendorEccUncorrectable", "uncorrectable (vendor counter)")]
