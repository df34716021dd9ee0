"""Node-wide rules: the number of GPUs the backend sees, and the host's InfiniBand / RoCE ports.

- `gpu_count_rule`: fewer GPUs than the pool expects fails (GpuMissing), but only from a working
  backend: a dead NVML sees no devices without any being missing.
- `infiniband_rule`: from /sys/class/infiniband (`backends.infiniband`). A port in use whose
  logical state is not ACTIVE or whose physical state is not LinkUp fails (IbPortDown); a port
  that is administratively Disabled (phys_state 3) is not in use and is ignored. On InfiniBand
  ports the error counters are judged on their rate per minute over the window against
  `IB_LIMITS`: `link_downed` rising is a flapping link (IbLinkFlapping), the others errors
  (IbErrorRate); both warn. Ethernet (RoCE) ports are judged on their state only: their IB
  performance counters do not describe the Ethernet link.
- No RDMA device at all skips the check: not every GPU node has InfiniBand.

Pure functions; the actions they ask for are `rules.actions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from accelpool_agent.model import Check, CheckResult, CheckStatus, IbPort

IB_LIMITS: Mapping[str, float] = {
    # counter: warning rate per minute. The thresholds of infiniband-diags' `ibqueryerrors`
    # (rdma-core, /etc/infiniband-diags/error_thresholds defaults: 10 for the link error
    # counters, 100 for the congestion-like ones), applied to each 10-minute window.
    "symbol_error": 1.0,
    "link_error_recovery": 1.0,
    "port_rcv_errors": 1.0,
    "local_link_integrity_errors": 1.0,
    "excessive_buffer_overrun_errors": 1.0,
    "port_xmit_discards": 10.0,
}
FLAP_COUNTER = "link_downed"
"""A rising `link_downed` is a link that went down and came back: any increase warns."""


def gpu_count_rule(found: int, expected: int | None, backend_error: str | None) -> CheckResult:
    if expected is None:
        return CheckResult(Check.GPU_COUNT, CheckStatus.SKIP, "NotConfigured", "no expected GPU count configured")
    if backend_error:
        return CheckResult(Check.GPU_COUNT, CheckStatus.SKIP, "BackendUnavailable", "the backend cannot count GPUs")
    if found < expected:
        text = f"found {found} of {expected} GPUs"
        return CheckResult(
            Check.GPU_COUNT, CheckStatus.FAIL, "GpuMissing", text, value=float(found), unit="gpus", summary=text
        )
    return CheckResult(
        Check.GPU_COUNT,
        CheckStatus.PASS,
        "GpuCountOk",
        f"{found} GPUs (expected {expected})",
        value=float(found),
        unit="gpus",
    )


def _port_rates(port: IbPort, rates: Mapping[str, float]) -> dict[str, float]:
    prefix = f"{port.name}:"
    return {key.removeprefix(prefix): rate for key, rate in rates.items() if key.startswith(prefix)}


def infiniband_rule(ports: Sequence[IbPort], rates: Mapping[str, float]) -> CheckResult:
    """`rates`: `<device>/<port>:<counter>` → increase per minute over the window."""
    in_use = [port for port in ports if not port.disabled]
    if not in_use:
        return CheckResult(Check.INFINIBAND, CheckStatus.SKIP, "NoPorts", "no InfiniBand or RoCE port in use")
    down = [port for port in in_use if not port.up]
    if down:
        names = ", ".join(port.name for port in down)
        states = "; ".join(f"{port.name} {port.state_name}/{port.phys_state_name}" for port in down)
        return CheckResult(
            Check.INFINIBAND,
            CheckStatus.FAIL,
            "IbPortDown",
            f"RDMA port(s) not active: {states}",
            value=float(len(down)),
            unit="ports",
            summary=f"RDMA port {names} down",
        )
    flapping: list[str] = []
    erring: list[str] = []
    for port in in_use:
        if port.link_layer != "InfiniBand":
            continue
        for counter, rate in sorted(_port_rates(port, rates).items()):
            if counter == FLAP_COUNTER and rate > 0:
                flapping.append(port.name)
            elif rate >= IB_LIMITS.get(counter, float("inf")):
                erring.append(f"{port.name} {counter} {rate:.1f}/min")
    if flapping:
        names = ", ".join(dict.fromkeys(flapping))
        return CheckResult(
            Check.INFINIBAND,
            CheckStatus.WARN,
            "IbLinkFlapping",
            f"link went down and came back (link_downed rising): {names}",
            summary=f"InfiniBand link {names} flapping",
        )
    if erring:
        return CheckResult(
            Check.INFINIBAND,
            CheckStatus.WARN,
            "IbErrorRate",
            f"InfiniBand error counters rising: {', '.join(erring[:6])}",
            summary="InfiniBand port error counters rising",
        )
    return CheckResult(
        Check.INFINIBAND,
        CheckStatus.PASS,
        "IbPortsActive",
        f"{len(in_use)} RDMA port(s) active",
        value=float(len(in_use)),
        unit="ports",
    )
