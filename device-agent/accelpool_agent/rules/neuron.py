"""AWS Neuron rules (Trainium, Trainium2, Inferentia2): one device's neuron-monitor readings in, results out.

The signals are neuron-monitor's ("Neuron Monitor User Guide", aws-neuron-sdk
tools/neuron-sys-tools/neuron-monitor-user-guide.rst), as `backends.neuron` maps them:

- `device` (`device_rule`, shared with NVIDIA): a device missing from the latest report is lost
  (GpuLost → restart-os: a device that stops enumerating needs the host to boot again).
- `ecc`: `mem_ecc_uncorrected` (device DRAM: HBM) or `sram_ecc_uncorrected` above zero fails
  (NeuronHbmUncorrectable, NeuronSramUncorrectable). The guide's `error_summary` names
  "uncorrectable ECC issues" as its example of a *hardware* error. The guide prescribes no repair;
  a Neuron device is not serviceable by the tenant and its uncorrectable counter does not clear by
  resetting anything we can reset, so the action is service-required: the node (the EC2 instance)
  is to be replaced. Corrected counts (`mem_ecc_corrected`, `sram_ecc_corrected`) rising within the
  window warn (NeuronEccCorrectedRising, no action): the guide calls corrections "recoverable".
- `xid` (the vendor's error events; Neuron has no XIDs): the runtime's execution errors by class.
  `hardware` ("hardware errors such as uncorrectable ECC issues") since the agent started fails
  (NeuronHardwareError → service-required, as above). `numerical` ("NAN errors") and `transient`
  ("recoverable errors, such as ECC corrections") rising within the window warn (no action): a
  NaN is usually the model's, a transient error was recovered. `generic`, `model` and `runtime`
  errors are the application's (the guide: model-related, Neuron Runtime errors) and pass with
  a note.

The window's rates come from `rules.rates.CounterWindow` over `neuron_counters(telemetry)` (the
agent keeps one window per device, as it does for NVLink counters). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from accelpool_agent.model import Check, CheckResult, CheckStatus, Telemetry
from accelpool_agent.rules.findings import with_action
from accelpool_agent.rules.telemetry import device_rule
from accelpool_core.protocol import Action

NEURON_ACTIONS: Mapping[str, Action] = {
    "NeuronHbmUncorrectable": Action.SERVICE_REQUIRED,
    "NeuronSramUncorrectable": Action.SERVICE_REQUIRED,
    "NeuronHardwareError": Action.SERVICE_REQUIRED,
}
"""Reason → the ladder step (the module's docstring says why)."""

CORRECTED_COUNTERS = ("mem_ecc_corrected", "sram_ecc_corrected")
WARNING_ERRORS = ("numerical", "transient")
APPLICATION_ERRORS = ("generic", "model", "runtime")

_result = CheckResult.of


def neuron_counters(telemetry: Telemetry) -> dict[str, int]:
    """The monotonic counters whose rate the rules judge, by name, for a `CounterWindow`."""
    counters: dict[str, int] = {}
    if telemetry.ecc is not None:
        counters["mem_ecc_corrected"] = telemetry.ecc.volatile_single or 0
    if telemetry.sram_ecc is not None:
        counters["sram_ecc_corrected"] = telemetry.sram_ecc.volatile_single or 0
    for name, count in (telemetry.execution_errors or {}).items():
        counters[f"execution_{name}"] = count
    return counters


def neuron_ecc_rule(telemetry: Telemetry | None, rates: Mapping[str, float]) -> CheckResult:
    """Uncorrected HBM or SRAM ECC fails; corrected counts rising within the window warn."""
    if telemetry is None or (telemetry.ecc is None and telemetry.sram_ecc is None):
        return _result(Check.ECC, CheckStatus.SKIP, "EccUnavailable", "neuron-monitor reports no ECC counters")
    hbm = (telemetry.ecc.volatile_double or 0) if telemetry.ecc else 0
    sram = (telemetry.sram_ecc.volatile_double or 0) if telemetry.sram_ecc else 0
    for count, reason, memory in ((hbm, "NeuronHbmUncorrectable", "HBM"), (sram, "NeuronSramUncorrectable", "SRAM")):
        if count > 0:
            return _result(
                Check.ECC,
                CheckStatus.FAIL,
                reason,
                f"{count} uncorrected ECC error(s) in the device's {memory}",
                f"uncorrected {memory} ECC errors",
                value=float(count),
                unit="count",
            )
    rising = {name: rate for name in CORRECTED_COUNTERS if (rate := rates.get(name, 0.0)) > 0}
    if rising:
        text = ", ".join(f"{name} +{rate:.3g}/min" for name, rate in sorted(rising.items()))
        return _result(
            Check.ECC,
            CheckStatus.WARN,
            "NeuronEccCorrectedRising",
            f"corrected ECC errors rising: {text}",
            "corrected ECC errors rising",
            value=max(rising.values()),
            unit="per_minute",
        )
    return _result(
        Check.ECC, CheckStatus.PASS, "NoUncorrectableErrors", "no uncorrected ECC errors", value=0.0, unit="count"
    )


def neuron_execution_rule(telemetry: Telemetry | None, rates: Mapping[str, float]) -> CheckResult:
    """Hardware execution errors fail; numerical or transient ones rising warn; the application's pass, noted."""
    errors = telemetry.execution_errors if telemetry is not None else None
    if errors is None:
        return _result(Check.XID, CheckStatus.SKIP, "NoData", "neuron-monitor reports no execution stats")
    hardware = errors.get("hardware", 0)
    if hardware > 0:
        return _result(
            Check.XID,
            CheckStatus.FAIL,
            "NeuronHardwareError",
            f"{hardware} execution(s) failed with a hardware error since the agent started",
            "executions failed with hardware errors",
            value=float(hardware),
            unit="count",
        )
    rising = {name: rate for name in WARNING_ERRORS if (rate := rates.get(f"execution_{name}", 0.0)) > 0}
    if rising:
        text = ", ".join(f"{name} +{rate:.3g}/min" for name, rate in sorted(rising.items()))
        return _result(
            Check.XID,
            CheckStatus.WARN,
            "NeuronExecutionErrors",
            f"executions failing with numerical or transient errors: {text}",
            "numerical or transient execution errors",
            value=max(rising.values()),
            unit="per_minute",
        )
    application = {name: errors[name] for name in APPLICATION_ERRORS if errors.get(name, 0) > 0}
    if application:
        text = ", ".join(f"{name} {count}" for name, count in sorted(application.items()))
        noted = _result(
            Check.XID,
            CheckStatus.PASS,
            "NeuronApplicationErrors",
            f"application execution errors (not the device's): {text}",
            "application execution errors (not the device's)",
            value=float(sum(application.values())),
            unit="count",
        )
        return replace(noted, noteworthy=True)
    return _result(Check.XID, CheckStatus.PASS, "NoExecutionErrors", "no execution errors", value=0.0, unit="count")


def _with_neuron_action(result: CheckResult) -> CheckResult:
    action = NEURON_ACTIONS.get(result.reason)
    return with_action(replace(result, action=action) if action is not None else result)


def neuron_checks(telemetry: Telemetry | None, *, rates: Mapping[str, float], now: float) -> list[CheckResult]:
    """Every Neuron rule on one device; `rates` per minute over the window, keyed as `neuron_counters`."""
    results = [device_rule(telemetry), neuron_ecc_rule(telemetry, rates), neuron_execution_rule(telemetry, rates)]
    return [_with_neuron_action(replace(r, finished_at=now)) for r in results]
