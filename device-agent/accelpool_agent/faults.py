"""Fault injection for the fake backend: the `--fault GPU:FAULT[,FAULT...]` syntax.

`3:xid=79` gives GPU 3 an XID 79; `all:hang` hangs every GPU's compute checks; `0,2:ecc-dbe`
and `4-7:slow-matmul=2` name several GPUs. Parsing is pure and its errors name the offending
value and the valid choices, for the CLI to print (exit status 2).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class FaultKind(enum.StrEnum):
    XID = "xid"
    ECC_DBE = "ecc-dbe"
    FATAL = "fatal"
    SLOW_MATMUL = "slow-matmul"
    WRONG_RESULTS = "wrong-results"
    HANG = "hang"
    LOST = "lost"
    HOT = "hot"
    THROTTLE = "throttle"
    ROW_REMAP_FAILURE = "row-remap-failure"
    ROW_REMAP_PENDING = "row-remap-pending"
    LOW_BANDWIDTH = "low-bandwidth"
    PCIE_DEGRADED = "pcie-degraded"
    BUSY = "busy"
    CUDA_ERROR = "cuda-error"
    CRASH = "crash"
    NVLINK_DOWN = "nvlink-down"
    NVLINK_ERRORS = "nvlink-errors"
    FABRIC_UNREGISTERED = "fabric-unregistered"
    FABRIC_DEGRADED = "fabric-degraded"
    PCIE_GEN_LOW = "pcie-gen-low"
    POWER_HIGH = "power-high"
    PSTATE_STUCK = "pstate-stuck"
    CLOCKS_LOW = "clocks-low"
    IB_DOWN = "ib-down"
    IB_ERRORS = "ib-errors"
    IB_FLAP = "ib-flap"
    OLD_DRIVER = "old-driver"
    RESET_REQUIRED = "reset-required"


FAULT_HELP: dict[FaultKind, str] = {
    FaultKind.XID: "xid=<n>: the driver reports XID n (79 fails the GPU, 94 and 13 warn, 43 is informational; "
    "NVIDIA only: other vendors have no XIDs, use fatal)",
    FaultKind.ECC_DBE: "ecc-dbe: a double-bit (uncorrectable) ECC error",
    FaultKind.FATAL: "fatal: the vendor's fatal device error: XID 79 (NVIDIA), amdsmi RING_HANG (AMD), a hardware "
    "execution error (AWS Neuron), the chip stops answering and is gone (Google TPU)",
    FaultKind.SLOW_MATMUL: "slow-matmul[=<factor>]: matmul runs <factor> times slower (default 2; 0.5 = half speed)",
    FaultKind.WRONG_RESULTS: "wrong-results: matmul results are silently corrupted",
    FaultKind.HANG: "hang: compute checks never finish (killed at the check timeout)",
    FaultKind.LOST: "lost: the GPU stops answering (fallen off the bus)",
    FaultKind.HOT: "hot: the GPU runs at its slowdown temperature and throttles",
    FaultKind.THROTTLE: "throttle: hardware slowdown / power-brake throttling",
    FaultKind.ROW_REMAP_FAILURE: "row-remap-failure: a memory row could not be remapped",
    FaultKind.ROW_REMAP_PENDING: "row-remap-pending: a row remap waits for a GPU reset",
    FaultKind.LOW_BANDWIDTH: "low-bandwidth[=<factor>]: memory bandwidth <factor> times lower (default 2)",
    FaultKind.PCIE_DEGRADED: "pcie-degraded: the PCIe link trained at half its width",
    FaultKind.BUSY: "busy: a compute process runs on the GPU (compute checks are skipped)",
    FaultKind.CUDA_ERROR: "cuda-error: creating a CUDA context fails",
    FaultKind.CRASH: "crash: the compute check process dies",
    FaultKind.NVLINK_DOWN: "nvlink-down: NVLink 0 of the GPU goes down while its other links stay up",
    FaultKind.NVLINK_ERRORS: "nvlink-errors[=<per-minute>]: NVLink 0 counts replay errors at this rate (default 600)",
    FaultKind.FABRIC_UNREGISTERED: "fabric-unregistered: the GPU is not registered with the NVSwitch fabric",
    FaultKind.FABRIC_DEGRADED: "fabric-degraded: the NVSwitch fabric reports degraded bandwidth for the GPU",
    FaultKind.PCIE_GEN_LOW: "pcie-gen-low: the GPU is loaded and its PCIe link runs two generations below its maximum",
    FaultKind.POWER_HIGH: "power-high: the GPU draws 125% of its enforced power limit",
    FaultKind.PSTATE_STUCK: "pstate-stuck: the GPU is loaded but stays in performance state P8",
    FaultKind.CLOCKS_LOW: "clocks-low: the GPU is loaded but its SM clock stays at 30% with no throttle reason",
    FaultKind.IB_DOWN: "ib-down: the InfiniBand port paired with the GPU (mlx5_<gpu>) is down (HGX nodes)",
    FaultKind.IB_ERRORS: "ib-errors[=<per-minute>]: that port counts symbol errors at this rate (default 60)",
    FaultKind.IB_FLAP: "ib-flap: that port goes down and comes back between every two readings (link_downed)",
    FaultKind.RESET_REQUIRED: "reset-required: the driver's recovery action for the GPU is a GPU reset",
    FaultKind.OLD_DRIVER: "old-driver: the node runs driver 535.104.05 (CUDA 12.2) instead of 550.54.15 (12.4)",
}

_VALUED = {FaultKind.XID, FaultKind.SLOW_MATMUL, FaultKind.LOW_BANDWIDTH, FaultKind.NVLINK_ERRORS, FaultKind.IB_ERRORS}
_DEFAULT_FACTOR = 2.0


class FaultSpecError(ValueError):
    """A `--fault` value that cannot be parsed; the message says what would be valid."""


def valid_faults() -> str:
    return ", ".join(_syntax(kind) for kind in FaultKind)


def _syntax(kind: FaultKind) -> str:
    return FAULT_HELP[kind].split(":", 1)[0]


@dataclass(frozen=True)
class Fault:
    """One injected fault. `value` is the XID number or the slowdown factor where the kind takes one."""

    kind: FaultKind
    value: float | None = None

    def rate(self, default: float) -> float:
        """Errors per minute of a rate fault (`nvlink-errors=<per-minute>`), `default` without a value."""
        return default if self.value is None else self.value

    @property
    def factor(self) -> float:
        """Slowdown as a divisor ≥ 1: `slow-matmul=2` and `slow-matmul=0.5` both halve the speed."""
        value = _DEFAULT_FACTOR if self.value is None else self.value
        return value if value >= 1 else 1 / value

    def __str__(self) -> str:
        if self.value is None:
            return self.kind.value
        shown = int(self.value) if float(self.value).is_integer() else self.value
        return f"{self.kind.value}={shown}"


@dataclass(frozen=True)
class FaultSpec:
    """A parsed `--fault` value: which GPUs (None = all) get which faults."""

    gpus: tuple[int, ...] | None
    faults: tuple[Fault, ...]
    text: str


def parse_fault_spec(text: str) -> FaultSpec:
    """Parse `GPU:FAULT[,FAULT...]` where GPU is an index, a list `0,2`, a range `4-7` or `all`."""
    target, sep, body = text.strip().partition(":")
    if not sep or not target.strip() or not body.strip():
        raise FaultSpecError(
            f"invalid --fault {text!r}: expected GPU:FAULT, e.g. 3:xid=79, 0,2:ecc-dbe or all:hang; "
            f"valid faults: {valid_faults()}"
        )
    gpus = _parse_targets(target.strip(), text)
    faults = tuple(_parse_fault(item.strip(), text) for item in body.split(","))
    return FaultSpec(gpus=gpus, faults=faults, text=text)


def _parse_targets(target: str, text: str) -> tuple[int, ...] | None:
    if target.lower() in {"all", "*"}:
        return None
    indexes: list[int] = []
    for part in target.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise FaultSpecError(
                f"invalid --fault {text!r}: GPU {part.strip()!r} is not an index; "
                "use a GPU index (3), a list (0,2), a range (4-7) or 'all'"
            ) from None
        if first < 0 or last < first:
            raise FaultSpecError(f"invalid --fault {text!r}: GPU range {part.strip()!r} is empty or negative")
        indexes.extend(range(first, last + 1))
    return tuple(sorted(set(indexes)))


def _parse_fault(item: str, text: str) -> Fault:
    name, eq, raw = item.partition("=")
    key = name.strip().lower().replace("_", "-")
    try:
        kind = FaultKind(key)
    except ValueError:
        raise FaultSpecError(
            f"invalid --fault {text!r}: unknown fault {name.strip()!r}; valid faults: {valid_faults()}"
        ) from None
    if not eq:
        if kind is FaultKind.XID:
            raise FaultSpecError(f"invalid --fault {text!r}: xid needs a number, e.g. xid=79")
        return Fault(kind)
    if kind not in _VALUED:
        raise FaultSpecError(f"invalid --fault {text!r}: {kind.value} takes no value (got {raw!r})")
    if kind is FaultKind.XID:
        try:
            xid = int(raw)
        except ValueError:
            xid = -1
        if xid <= 0:
            raise FaultSpecError(f"invalid --fault {text!r}: xid needs a positive integer, e.g. xid=79 (got {raw!r})")
        return Fault(kind, float(xid))
    try:
        factor = float(raw)
    except ValueError:
        factor = -1.0
    if not factor > 0 or factor == float("inf"):
        raise FaultSpecError(
            f"invalid --fault {text!r}: {kind.value} needs a positive factor, e.g. {kind.value}=2 (got {raw!r})"
        )
    return Fault(kind, factor)


def faults_by_gpu(specs: Iterable[FaultSpec], gpu_count: int) -> dict[int, tuple[Fault, ...]]:
    """Which faults each GPU gets; an index beyond the GPUs there are is an error."""
    result: dict[int, list[Fault]] = {}
    for spec in specs:
        targets = range(gpu_count) if spec.gpus is None else spec.gpus
        for index in targets:
            if index >= gpu_count:
                valid = f"0-{gpu_count - 1}" if gpu_count else "none (no GPUs)"
                raise FaultSpecError(
                    f"invalid --fault {spec.text!r}: GPU {index} does not exist; valid GPU indexes: {valid} or 'all'"
                )
            result.setdefault(index, []).extend(spec.faults)
    return {index: tuple(faults) for index, faults in sorted(result.items())}


def find(faults: Iterable[Fault], kind: FaultKind) -> list[Fault]:
    """The faults of one kind, in order (what a fake backend injects for that kind)."""
    return [fault for fault in faults if fault.kind is kind]
