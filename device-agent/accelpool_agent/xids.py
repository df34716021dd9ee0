"""What each NVIDIA XID error means for a GPU's health: one table, with NVIDIA's recommended action.

Source: NVIDIA's XID catalog for Ampere and newer GPUs, column "Resolution Bucket (Immediate
Action)" (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), as mirrored
line by line in NVIDIA NVSentinel's default mapping
(github.com/NVIDIA/NVSentinel, distros/kubernetes/nvsentinel/charts/gpu-health-monitor/
xiderrorsmapping.csv). Every XID the catalog lists (1-162) is in `CATALOG` below with its
bucket; the agent's class follows from the bucket:

- RESET_GPU, RESTART_BM, RESTART_VM, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR, WORKFLOW_NVLINK5_ERR:
  *fatal*; the `xid` check fails (`XidError<n>`), sticky until the agent restarts.
- RESTART_APP (13, 31, 68, the copy and video engines, ...): *application*; warns
  (`XidError<n>`) for `xid_warning_window_seconds`, and fails when one XID repeats
  `xid_repeat_limit` times within that window.
- IGNORE, WORKFLOW_XID_45 (43, 45, 14, firmware notices, ...): *informational*; passes
  (`InformationalXid`, the XIDs listed in the message).
- CONTACT_SUPPORT (codes the catalog marks unused on A100/H100/B100/GB200), UPDATE_SWFW,
  CHECK_MECHANICALS, CHECK_UVM: *unexpected*; warns (`XidError<n>`) for the warning window.
- Not in the catalog (e.g. 99999, or a code newer than this table): *unknown*; warns
  (`XidError<n>`), and the message says that the number is unknown.

Where this table departs from the catalog's bucket, a comment at the entry says why:

- 63 (row remap / page retirement event; IGNORE) and 92 (high single-bit ECC rate; IGNORE)
  warn, as DCGM's health watch does for 63: both say that the memory is degrading and that a
  reset is due, which on-call should see; neither quarantines.
- 94 (contained ECC error; RESTART_APP) warns instead of counting as an application fault: the
  catalog asks for a GPU reset "when convenient".
- 109 (context-switch timeout): the shared reference note (from the device plugin) calls it
  application-caused, but NVIDIA's catalog says RESET_GPU. NVIDIA's catalog wins: fatal.
- NVSentinel marks the CONTACT_SUPPORT codes fatal; the catalog prescribes no reset for them
  and says they are not raised on data-center GPUs, so the agent warns (naming the number and
  NVIDIA's advice) rather than quarantining on a code it cannot interpret. A GPU that is really
  broken also fails the compute checks.

XID 13 (graphics engine exception) is application-caused in the catalog ("typically an
out-of-bounds error", RESTART_APP), but NVIDIA notes that in rare cases a hardware failure shows
up as XID 13: so it warns, and fails only when it repeats `xid_repeat_limit` times (default 10)
within an hour. That failure is not sticky: it clears when the XIDs stop.

Each bucket maps to a step of the action ladder (`LADDER`, `ladder_action`): a GPU reset for
RESET_GPU and the NVLink / XID 48 workflows (their first step is a reset), an OS restart for
RESTART_BM and RESTART_VM, a drain for RESTART_APP (the node is fine, the workload is not),
service for CONTACT_SUPPORT, UPDATE_SWFW and CHECK_MECHANICALS, nothing for IGNORE.

Pure data; the telemetry rules (`accelpool_agent.rules.xid_rule`) read it.
"""

from __future__ import annotations

import enum

from accelpool_core.protocol import Action

RESET_GPU = "RESET_GPU"
RESTART_BM = "RESTART_BM"
RESTART_VM = "RESTART_VM"
RESTART_APP = "RESTART_APP"
IGNORE = "IGNORE"
CONTACT_SUPPORT = "CONTACT_SUPPORT"
UPDATE_SWFW = "UPDATE_SWFW"
CHECK_MECHANICALS = "CHECK_MECHANICALS"
CHECK_UVM = "CHECK_UVM"
WORKFLOW_XID_45 = "WORKFLOW_XID_45"
WORKFLOW_XID_48 = "WORKFLOW_XID_48"
WORKFLOW_NVLINK_ERR = "WORKFLOW_NVLINK_ERR"
WORKFLOW_NVLINK5_ERR = "WORKFLOW_NVLINK5_ERR"
XID_154 = "XID_154"

_UNUSED = "unused on data-center GPUs"

CATALOG: dict[int, tuple[str, str]] = {
    # xid: (what it is, NVIDIA's immediate action)
    1: (_UNUSED, CONTACT_SUPPORT),
    2: (_UNUSED, CONTACT_SUPPORT),
    3: (_UNUSED, CONTACT_SUPPORT),
    4: (_UNUSED, CONTACT_SUPPORT),
    5: (_UNUSED, CONTACT_SUPPORT),
    6: (_UNUSED, CONTACT_SUPPORT),
    7: (_UNUSED, CONTACT_SUPPORT),
    8: ("GPU stopped processing (FIFO idle timeout)", RESTART_APP),
    9: (_UNUSED, CONTACT_SUPPORT),
    10: (_UNUSED, CONTACT_SUPPORT),
    11: ("invalid or corrupted push buffer stream", RESTART_APP),
    12: (_UNUSED, CONTACT_SUPPORT),
    13: ("graphics engine exception", RESTART_APP),
    14: ("injected (fake) error", IGNORE),
    **{xid: (_UNUSED, CONTACT_SUPPORT) for xid in range(15, 25)},
    25: ("illegal push buffer stream", RESTART_APP),
    **{xid: (_UNUSED, CONTACT_SUPPORT) for xid in range(26, 31)},
    31: ("GPU memory page fault", RESTART_APP),
    32: ("invalid or corrupted push buffer stream (PBDMA)", RESTART_APP),
    **{xid: (_UNUSED, CONTACT_SUPPORT) for xid in range(33, 37)},
    37: ("driver firmware error (unimplemented firmware method)", IGNORE),
    38: ("driver firmware error (watchdog timeout)", IGNORE),
    39: ("copy engine exception (CE0)", RESTART_APP),
    40: ("copy engine exception (CE1)", RESTART_APP),
    41: ("copy engine exception (CE2)", RESTART_APP),
    42: (_UNUSED, CONTACT_SUPPORT),
    43: ("GPU stopped processing (application fault; the GPU stays healthy)", IGNORE),
    44: ("graphics engine fault during context switch", IGNORE),
    45: ("preemptive cleanup after an earlier error", WORKFLOW_XID_45),
    46: ("GPU stopped processing (GPU timeout)", RESET_GPU),
    47: (_UNUSED, CONTACT_SUPPORT),
    48: ("double-bit ECC error", WORKFLOW_XID_48),
    **{xid: (_UNUSED, CONTACT_SUPPORT) for xid in range(49, 54)},
    54: ("power-reduced clocking", CHECK_MECHANICALS),
    **{xid: (_UNUSED, CONTACT_SUPPORT) for xid in range(55, 60)},
    60: ("SEC2 engine exception", RESTART_APP),
    61: ("internal micro-controller breakpoint", CONTACT_SUPPORT),
    62: ("internal micro-controller halt", RESET_GPU),
    # 63: the catalog says IGNORE; DCGM's health watch warns (a remap waits for a reset): warning.
    63: ("row remapping / page retirement event, reset required", IGNORE),
    64: ("row remapping / page retirement failure", RESET_GPU),
    65: (_UNUSED, CONTACT_SUPPORT),
    66: ("firmware register access violation", IGNORE),
    67: ("firmware verification violation", IGNORE),
    68: ("video processor exception (NVDEC0)", RESTART_APP),
    69: ("graphics engine class error", RESTART_APP),
    70: ("copy engine exception (CE3)", RESTART_APP),
    71: ("copy engine exception (CE4)", RESTART_APP),
    72: ("copy engine exception (CE5)", RESTART_APP),
    73: (_UNUSED, CONTACT_SUPPORT),
    74: ("NVLink error", WORKFLOW_NVLINK_ERR),
    75: ("copy engine exception (CE6)", RESTART_APP),
    76: ("copy engine exception (CE7)", RESTART_APP),
    77: ("copy engine exception (CE8)", RESTART_APP),
    78: ("vGPU start error", UPDATE_SWFW),
    79: ("GPU has fallen off the bus", RESTART_BM),
    80: ("corrupted data sent to the GPU (push buffer CRC mismatch)", RESTART_APP),
    81: (_UNUSED, CONTACT_SUPPORT),
    82: ("video processor exception (NVJPG0)", RESTART_APP),
    83: ("video processor exception (NVDEC1)", RESTART_APP),
    84: ("video processor exception (NVDEC2)", RESTART_APP),
    85: ("copy engine exception (CE9)", RESTART_APP),
    86: ("optical flow accelerator exception (OFA0)", RESTART_APP),
    87: (_UNUSED, CONTACT_SUPPORT),
    88: ("video processor exception (NVDEC3)", RESTART_APP),
    89: ("video processor exception (NVDEC4)", RESTART_APP),
    90: ("L2 cache (LTC) error", CONTACT_SUPPORT),
    91: (_UNUSED, CONTACT_SUPPORT),
    # 92: the catalog says IGNORE; a high corrected-error rate is a degradation signal: warning.
    92: ("high single-bit ECC error rate", IGNORE),
    93: ("InfoROM erase limit exceeded", IGNORE),
    # 94: the catalog says RESTART_APP and "reset the GPU when convenient": warning.
    94: ("contained ECC error, reset required", RESTART_APP),
    95: ("uncontained ECC error", RESET_GPU),
    96: ("video processor exception (NVDEC5)", RESTART_APP),
    97: ("video processor exception (NVDEC6)", RESTART_APP),
    98: ("video processor exception (NVDEC7)", RESTART_APP),
    **{xid: (f"video processor exception (NVJPG{xid - 98})", RESTART_APP) for xid in range(99, 106)},
    106: ("SMBPBI test message", IGNORE),
    107: ("SMBPBI test message (silent)", IGNORE),
    108: ("FLA translation error", CONTACT_SUPPORT),
    # 109: the reference note (device plugin) calls it application-caused; NVIDIA's catalog says
    # RESET_GPU, and the catalog wins: fatal.
    109: ("context switch timeout", RESET_GPU),
    110: ("security fault", RESET_GPU),
    **{xid: ("display engine error", CONTACT_SUPPORT) for xid in range(111, 119)},
    119: ("GSP RPC timeout", RESET_GPU),
    120: ("GSP error", RESET_GPU),
    121: ("C2C link error (corrected)", IGNORE),
    122: ("SPI PMU RPC read failure", CONTACT_SUPPORT),
    123: ("SPI PMU RPC write failure", CONTACT_SUPPORT),
    124: ("SPI PMU RPC erase failure", CONTACT_SUPPORT),
    125: ("InfoROM file system error", CONTACT_SUPPORT),
    **{xid: (f"copy engine exception (CE{xid - 116})", RESTART_APP) for xid in range(126, 136)},
    136: ("NVLink training (ALI) failure", RESET_GPU),
    137: ("NVLink FLA privilege error", IGNORE),
    138: (_UNUSED, CONTACT_SUPPORT),
    139: ("optical flow accelerator exception (OFA1)", RESTART_APP),
    140: ("unrecovered ECC error", RESET_GPU),
    141: ("fast path error", IGNORE),
    142: (_UNUSED, CONTACT_SUPPORT),
    143: ("GPU initialization error", RESET_GPU),
    144: ("NVLink SAW error", WORKFLOW_NVLINK5_ERR),
    145: ("NVLink RLW error", WORKFLOW_NVLINK5_ERR),
    146: ("NVLink TLW error", WORKFLOW_NVLINK5_ERR),
    147: ("NVLink TREX error", WORKFLOW_NVLINK5_ERR),
    148: ("NVLink NVLPW control error", WORKFLOW_NVLINK5_ERR),
    149: ("NVLink NETIR error", WORKFLOW_NVLINK5_ERR),
    150: ("NVLink MSE error", WORKFLOW_NVLINK5_ERR),
    151: ("key rotation error", RESTART_VM),
    152: ("DLA SMMU error", IGNORE),
    153: ("DLA timeout", IGNORE),
    # 154 summarises the recovery action another XID needs: warn (the other XID decides).
    154: ("GPU recovery action changed", XID_154),
    155: ("NVLink software-defined error", RESET_GPU),
    156: ("resource retirement event", RESET_GPU),
    157: ("resource retirement failure", IGNORE),
    158: ("GPU fatal timeout", RESET_GPU),
    159: ("CHI non-data error", CHECK_UVM),
    160: ("channel retirement event", RESTART_BM),
    161: ("channel retirement failure", IGNORE),
    162: ("GPU error requiring a reset", RESET_GPU),
}


class XidClass(enum.StrEnum):
    FATAL = "fatal"
    WARNING = "warning"
    APPLICATION = "application"
    INFORMATIONAL = "informational"
    UNEXPECTED = "unexpected"
    UNKNOWN = "unknown"


_BY_BUCKET: dict[str, XidClass] = {
    RESET_GPU: XidClass.FATAL,
    RESTART_BM: XidClass.FATAL,
    RESTART_VM: XidClass.FATAL,
    WORKFLOW_XID_48: XidClass.FATAL,
    WORKFLOW_NVLINK_ERR: XidClass.FATAL,
    WORKFLOW_NVLINK5_ERR: XidClass.FATAL,
    RESTART_APP: XidClass.APPLICATION,
    IGNORE: XidClass.INFORMATIONAL,
    WORKFLOW_XID_45: XidClass.INFORMATIONAL,
    XID_154: XidClass.WARNING,
    CONTACT_SUPPORT: XidClass.UNEXPECTED,
    UPDATE_SWFW: XidClass.UNEXPECTED,
    CHECK_MECHANICALS: XidClass.UNEXPECTED,
    CHECK_UVM: XidClass.UNEXPECTED,
}
_OVERRIDES: dict[int, XidClass] = {63: XidClass.WARNING, 92: XidClass.WARNING, 94: XidClass.WARNING}
"""Departures from the bucket (see the module docstring and the comments at the entries)."""

LADDER: dict[str, Action] = {
    RESET_GPU: Action.RESET_GPU,
    RESTART_BM: Action.RESTART_OS,
    RESTART_VM: Action.RESTART_OS,
    WORKFLOW_XID_48: Action.RESET_GPU,  # the DBE's row remap takes effect at the next GPU reset
    WORKFLOW_NVLINK_ERR: Action.RESET_GPU,  # the catalog's NVLink workflow starts with a GPU reset
    WORKFLOW_NVLINK5_ERR: Action.RESET_GPU,
    XID_154: Action.RESET_GPU,  # the recovery action changed, at least to a GPU reset
    RESTART_APP: Action.DRAIN,
    IGNORE: Action.NONE,
    WORKFLOW_XID_45: Action.NONE,
    CONTACT_SUPPORT: Action.SERVICE_REQUIRED,
    UPDATE_SWFW: Action.SERVICE_REQUIRED,
    CHECK_MECHANICALS: Action.SERVICE_REQUIRED,
    CHECK_UVM: Action.DRAIN,
}
"""NVIDIA's immediate action (resolution bucket) → the step of the action ladder."""
_LADDER_OVERRIDES: dict[int, Action] = {63: Action.RESET_GPU, 94: Action.RESET_GPU}
"""63 (a row remap waits) and 94 (contained ECC error): the catalog asks for a GPU reset."""

FATAL: frozenset[int] = frozenset(x for x in CATALOG if _OVERRIDES.get(x, _BY_BUCKET[CATALOG[x][1]]) is XidClass.FATAL)
"""Every XID that fails the GPU; a superset of DCGM's (48, 64, 74, 79, 95, 119, 120, 140)."""


def classify(xid: int) -> XidClass:
    entry = CATALOG.get(xid)
    if entry is None:
        return XidClass.UNKNOWN
    return _OVERRIDES.get(xid, _BY_BUCKET[entry[1]])


def action(xid: int) -> str | None:
    """NVIDIA's immediate action for this XID (RESET_GPU, RESTART_APP, ...), None when unknown."""
    entry = CATALOG.get(xid)
    return entry[1] if entry else None


def ladder_action(xid: int) -> Action:
    """The step of the action ladder this XID asks for; service for one missing from the catalog."""
    if xid in _LADDER_OVERRIDES:
        return _LADDER_OVERRIDES[xid]
    bucket = action(xid)
    return LADDER[bucket] if bucket is not None else Action.SERVICE_REQUIRED


def describe(xid: int) -> str:
    """`XID 79 (GPU has fallen off the bus)`; `XID 99999 (not in NVIDIA's XID catalog)`."""
    entry = CATALOG.get(xid)
    return f"XID {xid} ({entry[0]})" if entry else f"XID {xid} (not in NVIDIA's XID catalog)"


def reason(xid: int) -> str:
    """The CamelCase reason code for a check that failed or warned on this XID."""
    return f"XidError{xid}"
