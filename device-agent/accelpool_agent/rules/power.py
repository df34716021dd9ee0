"""Power and clock rules: one GPU's power draw, performance state and SM clock against its load.

- `power_rule`: a draw above the enforced power limit by more than `power_margin` warns
  (PowerAboveLimit: the board's power capping or its sensor is not working); a loaded GPU whose
  performance state is above P2 warns (PowerStateStuck: compute runs in P0, or P2 on boards whose
  CUDA clocks are capped there, NVML `nvmlDeviceGetPerformanceState`). Power-brake and hardware
  slowdown throttling stay with the thermal check (PowerThrottle).
- `clocks_rule`: a loaded GPU whose SM clock is below `clocks_low_ratio` of its maximum warns
  (ClocksStuckLow) unless a throttle reason explains it (power cap, thermal or hardware
  slowdown, application clocks, sync boost: NVML's clock event reasons).

An idle GPU lowers its clocks and P-state on purpose: these rules judge loaded GPUs only. Pure
functions; the actions they ask for are `rules.actions`.
"""

from __future__ import annotations

from accelpool_agent.model import Check, CheckResult, CheckStatus, Telemetry
from accelpool_agent.rules.links import is_busy

HIGHEST_LOADED_PSTATE = 2
"""P-states above this (P3 ... P15) are power-saving states a loaded GPU should not stay in."""


def power_rule(telemetry: Telemetry | None, *, power_margin: float, busy_utilization: float) -> CheckResult:
    if telemetry is None or (telemetry.power_watts is None and telemetry.performance_state is None):
        return CheckResult(Check.POWER, CheckStatus.SKIP, "NoData", "no power or performance-state data")
    power, limit, pstate = telemetry.power_watts, telemetry.power_limit_watts, telemetry.performance_state
    if power is not None and limit and power > limit * (1 + power_margin):
        return CheckResult(
            Check.POWER,
            CheckStatus.WARN,
            "PowerAboveLimit",
            f"drawing {power:.0f} W, above the enforced limit of {limit:.0f} W by more than {power_margin:.0%}",
            value=power,
            unit="watts",
            summary="power draw above the enforced limit",
        )
    if pstate is not None and pstate > HIGHEST_LOADED_PSTATE and is_busy(telemetry, busy_utilization):
        return CheckResult(
            Check.POWER,
            CheckStatus.WARN,
            "PowerStateStuck",
            f"performance state P{pstate} while {telemetry.utilization_ratio:.0%} utilized (expected P0-P2)",
            value=power,
            unit="watts",
            summary="stuck in a power-saving performance state under load",
        )
    drawn = f"{power:.0f} W" if power is not None else "draw unknown"
    of_limit = f" of {limit:.0f} W" if limit else ""
    state = f", P{pstate}" if pstate is not None else ""
    return CheckResult(
        Check.POWER,
        CheckStatus.PASS,
        "PowerNormal",
        f"{drawn}{of_limit}{state}",
        value=power,
        unit="watts",
        summary="power normal",
    )


def clocks_rule(telemetry: Telemetry | None, *, clocks_low_ratio: float, busy_utilization: float) -> CheckResult:
    clock = telemetry.sm_clock_hertz if telemetry is not None else None
    maximum = telemetry.sm_clock_max_hertz if telemetry is not None else None
    if telemetry is None or clock is None or not maximum or telemetry.utilization_ratio is None:
        return CheckResult(Check.CLOCKS, CheckStatus.SKIP, "NoData", "no SM clock or utilization data")
    ratio = clock / maximum
    if not is_busy(telemetry, busy_utilization):
        return CheckResult(
            Check.CLOCKS, CheckStatus.PASS, "Idle", "not loaded: low clocks are expected", value=ratio, unit="ratio"
        )
    explained = sorted((telemetry.throttle_reasons or frozenset()) - {"gpu_idle"})
    load = f"{telemetry.utilization_ratio:.0%} load"
    text = f"SM clock {clock / 1e6:.0f} MHz = {ratio:.0%} of {maximum / 1e6:.0f} MHz at {load}"
    if ratio < clocks_low_ratio and not explained:
        return CheckResult(
            Check.CLOCKS,
            CheckStatus.WARN,
            "ClocksStuckLow",
            f"{text}, below {clocks_low_ratio:.0%} with no throttle reason",
            value=ratio,
            unit="ratio",
            summary="SM clock stuck low under load with no throttle reason",
        )
    why = f" (held back: {', '.join(explained)})" if explained and ratio < clocks_low_ratio else ""
    return CheckResult(
        Check.CLOCKS,
        CheckStatus.PASS,
        "ClocksNormal",
        f"{text}{why}",
        value=ratio,
        unit="ratio",
        summary="clocks normal",
    )
