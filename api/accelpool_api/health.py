"""`spec.health`: how members are checked, what happens to a node that fails, and the durations it is written in."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field

from accelpool_api.rules import Model, Rule, RuledModel, cel_string
from accelpool_core.protocol import AgentBackend

DURATION_PATTERN = r"^([0-9]{1,5}(\.[0-9]{1,9})?(ms|s|m|h)){1,4}$"
"""15m, 1h30m, 90s. At most 4 parts of at most 5 digits: even 4 x 99999h stays within what CEL's
duration() (Go's time.ParseDuration, int64 nanoseconds: about 2,562,047h) can parse, so the CRD's
duration rules never fail to evaluate (a rule that errors rejects the object with the error's text)."""
PERCENT_PATTERN = r"^(100|[1-9]?[0-9])%$"
MAX_DURATION_LENGTH = 32
"""Durations are short strings; the bound also keeps the API server's CEL cost estimate small."""
MIN_INTERVAL = "1m"
MAX_INTERVAL = "168h"
MIN_HOLD_DOWN = "10s"
"""A shorter hold-down releases a quarantined node on the first healthy report: `0s` let one flapping GPU go in
and out of quarantine 30 times in 74 s."""
MAX_HOLD_DOWN = "168h"
MAX_DRAIN_TIMEOUT = "168h"
MAX_GRACE_PERIOD = "24h"
FLAP_MEMORY = "24h"
"""How long a quarantine counts towards the hold-down of the node's next ones (`accelpool.decide.planning.flapping`)."""
FLAP_DOUBLINGS = 5
"""The hold-down doubles at most this many times: 32 x holdDown, as a crash-looping container's back-off (10 s
doubling to 5 min) stops growing."""
HOLD_DOWN_RANGE = f"holdDown must be from {MIN_HOLD_DOWN} to {MAX_HOLD_DOWN}"
HOLD_DOWN_WHY = (
    " (a shorter hold-down releases a quarantined node on its first healthy report, and a flapping GPU goes in "
    "and out of quarantine with every report)"
)
ANY_VENDOR_BACKENDS = ("cpu", "fake")
"""Backends that check no vendor's devices (the host CPU, simulated devices): valid for every pool."""


class MatmulPolicy(Model):
    """The matmul throughput check's pass mark."""

    dtype: Literal["fp32", "tf32", "fp16", "bf16"] = Field("bf16", description="Data type of the matmul check.")
    min_efficiency: float = Field(
        0.6, ge=0, le=1, description="Fail a GPU below this fraction of the catalog's dense peak."
    )


class DrainPolicy(RuledModel):
    """The ladder's second step: evict a quarantined node's workloads through the Eviction API."""

    enabled: bool = Field(
        False,
        description=(
            "Evict the pods of a quarantined member through the Eviction API (policy/v1), honouring their "
            "PodDisruptionBudgets; DaemonSet pods, mirror pods, the accelpool agent and completed pods stay. "
            "Needs remediation taint or cordon (a node that stays schedulable would take the pods back)."
        ),
    )
    grace_period: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] | None = Field(
        None,
        description=(
            f"The grace period each evicted pod gets to stop (deleteOptions.gracePeriodSeconds, whole seconds), "
            f"at most {MAX_GRACE_PERIOD}; when absent, the pod's own terminationGracePeriodSeconds."
        ),
    )
    timeout: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "30m",
        description=(
            f"How long a drain may take before a DrainTimedOut Warning names the pods left (evictions go on, "
            f"never past a PodDisruptionBudget), at most {MAX_DRAIN_TIMEOUT}."
        ),
    )

    rules = (
        Rule(
            f"!self.timeout.matches({cel_string(DURATION_PATTERN)})"
            f" || duration(self.timeout) <= duration('{MAX_DRAIN_TIMEOUT}')",
            lambda d: (
                not re.fullmatch(DURATION_PATTERN, d["timeout"])
                or _duration_within(d["timeout"], 0.0, parse_duration(MAX_DRAIN_TIMEOUT))
            ),
            f"timeout must be at most {MAX_DRAIN_TIMEOUT}",
            field="timeout",
        ),
        Rule(
            f"!has(self.gracePeriod) || !self.gracePeriod.matches({cel_string(DURATION_PATTERN)})"
            f" || duration(self.gracePeriod) <= duration('{MAX_GRACE_PERIOD}')",
            lambda d: (
                "gracePeriod" not in d
                or not re.fullmatch(DURATION_PATTERN, d["gracePeriod"])
                or _duration_within(d["gracePeriod"], 0.0, parse_duration(MAX_GRACE_PERIOD))
            ),
            f"gracePeriod must be at most {MAX_GRACE_PERIOD}",
            field="gracePeriod",
        ),
    )

    @property
    def grace_period_seconds(self) -> int | None:
        return None if self.grace_period is None else int(parse_duration(self.grace_period))

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout)


class HandOffPolicy(Model):
    """The ladder's third step: hand a drained node to an external break-fix step."""

    enabled: bool = Field(
        False,
        description=(
            "Once drained, label the node accelpool.io/remediation-action=<reset-gpu|restart-os|service-required> "
            "(the agent's recommended action), annotate it accelpool.io/remediation and post a "
            "RemediationRequested Warning, for NVSentinel's fault remediation, a cloud's repair or a human to act "
            "on. Nodes whose action is only a drain are not handed off. Needs drain enabled."
        ),
    )


class HealthSpec(RuledModel):
    """How members are checked and what happens to a node that fails."""

    interval: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "15m",
        description=(
            f"Time between full check cycles on a node (telemetry is continuous), "
            f"from {MIN_INTERVAL} to {MAX_INTERVAL}."
        ),
    )
    matmul: MatmulPolicy = Field(default_factory=MatmulPolicy)
    remediation: Literal["taint", "cordon", "none"] = Field(
        "taint", description="What happens to a node whose AcceleratorHealthy turns False."
    )
    max_unavailable: int | str = Field(
        "50%",
        description=(
            "Circuit breaker: never quarantine more than this many (or this % of) member nodes; in a pool that "
            "quarantines single GPUs (status.quarantine.scope GPU), GPUs of the pool (a quarantined node counts "
            "all its GPUs)."
        ),
        json_schema_extra={"x-kubernetes-int-or-string": True},
    )
    hold_down: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "10m",
        description=(
            f"How long a quarantined node must be healthy again before it is released, from {MIN_HOLD_DOWN} to "
            f"{MAX_HOLD_DOWN}. A node quarantined again soon after is held longer: the hold-down doubles for each "
            f"of its quarantines in the {FLAP_MEMORY} before, up to {2**FLAP_DOUBLINGS} times holdDown (and at "
            f"most {MAX_HOLD_DOWN})."
        ),
    )
    burn_in: bool | None = Field(
        None,
        description=(
            "Burn-in gate: a node joining the pool (claimed, or provisioned by Karpenter) carries the taint "
            "accelpool.io/burn-in=pending:NoSchedule until its agent reports a completed full check cycle with "
            "AcceleratorHealthy True; a node that fails it keeps accelpool.io/burn-in=failed while it is a member "
            "(once repaired, set the taint back to pending to burn it in again). Members at the time it is "
            "turned on are not tainted; turning it off lifts the taint. Unset: on for static "
            "pools, off for Karpenter pools, where it is a NodePool startup taint and turning it on or off is "
            "NodePool drift (Karpenter replaces the pool's existing nodes)."
        ),
    )

    gpu_taint_effect: Literal["NoSchedule", "NoExecute"] = Field(
        "NoSchedule",
        description=(
            "allocation DRA, GPU-scoped quarantine: the effect of the DeviceTaintRule on a bad GPU. NoSchedule "
            "keeps new claims off it and leaves running pods (drain evicts them through the Eviction API, honouring "
            "PodDisruptionBudgets); NoExecute has kube-controller-manager delete the pods using it at once, "
            "ignoring PodDisruptionBudgets."
        ),
    )
    drain: DrainPolicy = Field(default_factory=DrainPolicy)
    hand_off: HandOffPolicy = Field(default_factory=HandOffPolicy)
    backend: AgentBackend | None = Field(
        None,
        description=(
            "The agents' --backend for this pool. Unset: the operator's choice for the accelerator's vendor "
            "(nvidia: nvml, amd: amdsmi, aws: neuron, google: tpu; operator flags --agent-backends and "
            "--agent-backend)."
        ),
    )

    rules = (
        Rule(
            f"type(self.maxUnavailable) == string ? self.maxUnavailable.matches({cel_string(PERCENT_PATTERN)})"
            " : self.maxUnavailable >= 0",
            lambda h: (
                re.fullmatch(PERCENT_PATTERN, h["maxUnavailable"]) is not None
                if isinstance(h["maxUnavailable"], str)
                else isinstance(h["maxUnavailable"], int) and h["maxUnavailable"] >= 0
            ),
            "maxUnavailable must be a number >= 0 or a percentage like '50%'",
            field="maxUnavailable",
        ),
        Rule(
            # The pattern guard keeps the rule from erroring on a malformed duration, which the
            # schema's pattern reports (a rule that errors rejects with a second, noisier message).
            f"!self.interval.matches({cel_string(DURATION_PATTERN)})"
            f" || (duration(self.interval) >= duration('{MIN_INTERVAL}')"
            f" && duration(self.interval) <= duration('{MAX_INTERVAL}'))",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["interval"])
                or _duration_within(h["interval"], parse_duration(MIN_INTERVAL), parse_duration(MAX_INTERVAL))
            ),
            f"interval must be between {MIN_INTERVAL} and {MAX_INTERVAL} (a full check cycle runs compute checks "
            "on every GPU; telemetry and XIDs are watched continuously in between)",
            field="interval",
        ),
        Rule(
            f"!self.holdDown.matches({cel_string(DURATION_PATTERN)})"
            f" || (duration(self.holdDown) >= duration('{MIN_HOLD_DOWN}')"
            f" && duration(self.holdDown) <= duration('{MAX_HOLD_DOWN}'))",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["holdDown"])
                or _duration_within(h["holdDown"], parse_duration(MIN_HOLD_DOWN), parse_duration(MAX_HOLD_DOWN))
            ),
            HOLD_DOWN_RANGE,
            field="holdDown",
            message_expression=(
                f"{cel_string(HOLD_DOWN_RANGE + ', not ')} + self.holdDown + {cel_string(HOLD_DOWN_WHY)}"
            ),
            explain=lambda h: f"{HOLD_DOWN_RANGE}, not {h.get('holdDown')}{HOLD_DOWN_WHY}",
        ),
        Rule(
            "!has(self.drain) || !has(self.drain.enabled) || !self.drain.enabled || self.remediation != 'none'",
            lambda h: not (h.get("drain") or {}).get("enabled", False) or h.get("remediation", "taint") != "none",
            "drain needs remediation taint or cordon: with remediation none the node stays schedulable and would "
            "take the evicted pods back",
            field="drain",
        ),
        Rule(
            "!has(self.handOff) || !has(self.handOff.enabled) || !self.handOff.enabled"
            " || (has(self.drain) && has(self.drain.enabled) && self.drain.enabled)",
            lambda h: (
                not (h.get("handOff") or {}).get("enabled", False) or (h.get("drain") or {}).get("enabled", False)
            ),
            "handOff needs drain enabled: a GPU reset or an OS restart would kill the workloads a drain moves first",
            field="handOff",
        ),
    )

    @property
    def interval_seconds(self) -> float:
        return parse_duration(self.interval)

    @property
    def hold_down_seconds(self) -> float:
        return parse_duration(self.hold_down)

    def damped_hold_down_seconds(self, earlier: int) -> float:
        """The hold-down of a quarantine that follows `earlier` quarantines of the same node within `FLAP_MEMORY`:
        `holdDown` doubled for each, at most `FLAP_DOUBLINGS` times and never past `MAX_HOLD_DOWN` (exponential
        back-off, as the kubelet's for a crash-looping container, so a flapping GPU stays out longer each time)."""
        doubled = self.hold_down_seconds * float(2 ** min(max(earlier, 0), FLAP_DOUBLINGS))
        return max(self.hold_down_seconds, min(doubled, parse_duration(MAX_HOLD_DOWN)))

    def max_unavailable_nodes(self, desired: int) -> int:
        """The circuit breaker's limit for a pool of `desired` nodes (percentages round down, at least 1)."""
        if isinstance(self.max_unavailable, int):
            return self.max_unavailable
        percent = int(self.max_unavailable.rstrip("%"))
        return max(1, desired * percent // 100) if percent else 0


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_within(text: str, low: float, high: float) -> bool:
    try:
        seconds = parse_duration(text)
    except ValueError:
        return False
    return math.isfinite(seconds) and low <= seconds <= high


def format_duration(seconds: float) -> str:
    """Seconds → a duration as the spec writes one: `10m`, `1h20m`, `5m20s`, `12.5s`."""
    whole, fraction = divmod(round(seconds * 1000), 1000)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    if secs or fraction or not (hours or minutes):
        parts.append(f"{secs}.{fraction:03d}".rstrip("0").rstrip(".") + "s")
    return "".join(parts)


def parse_duration(text: str) -> float:
    """`15m`, `1h30m`, `90s` → seconds."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"duration {text!r} is not like 15m, 1h30m or 90s")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"([0-9.]+)(ms|s|m|h)", text))
