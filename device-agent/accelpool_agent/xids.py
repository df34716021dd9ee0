"""What each NVIDIA XID error means for a GPU's health.

The classification follows the field (shared reference "nvidia.md"): DCGM's health watch fails a
GPU on XIDs 48, 74, 79, 95, 119, 120, 140 and 64 and warns on 63 and 94; the device plugin
ignores the application-caused XIDs 13, 31, 43, 45, 68 and 109. XID 92 (high single-bit ECC
rate) is a warning. Any other XID is unclassified and warns, so it is seen without
quarantining the node. Pure data; the telemetry rules read it.
"""

from __future__ import annotations

import enum

FATAL: dict[int, str] = {
    48: "double-bit ECC error",
    64: "row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
WARNING: dict[int, str] = {
    63: "row remapping pending, reset required",
    92: "high single-bit ECC error rate",
    94: "contained ECC error, reset required",
}
APPLICATION: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    68: "video processor exception",
    109: "context switch timeout",
}


class XidClass(enum.StrEnum):
    FATAL = "fatal"
    WARNING = "warning"
    APPLICATION = "application"
    UNCLASSIFIED = "unclassified"


def classify(xid: int) -> XidClass:
    if xid in FATAL:
        return XidClass.FATAL
    if xid in WARNING:
        return XidClass.WARNING
    if xid in APPLICATION:
        return XidClass.APPLICATION
    return XidClass.UNCLASSIFIED


def describe(xid: int) -> str:
    """`XID 79 (GPU has fallen off the bus)`."""
    text = FATAL.get(xid) or WARNING.get(xid) or APPLICATION.get(xid)
    return f"XID {xid} ({text})" if text else f"XID {xid}"


def reason(xid: int) -> str:
    """The CamelCase reason code for a check that failed or warned on this XID."""
    return f"XidError{xid}"
