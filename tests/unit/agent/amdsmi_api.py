"""amdsmi's Python API surface for the stand-in (`fake_amdsmi`): its status codes, exceptions and enums.

Copied in name and value from ROCm/amdsmi: `amdsmi_status_t` (include/amd_smi/amdsmi.h, the same
values as py-interface/amdsmi_wrapper.py), the exception classes of py-interface/amdsmi_exception.py
and the enums of py-interface/amdsmi_interface.py (checked against amdsmi 7.0.2 on PyPI;
`AmdSmiEvtNotificationType` as ROCm 6.x defines it, amdsmi 7 renumbered it past GPU_POST_RESET).
Declarative data.
"""

from __future__ import annotations

import enum
from typing import Any

# amdsmi_status_t (include/amd_smi/amdsmi.h)
STATUS_SUCCESS = 0
STATUS_INVAL = 1
STATUS_NOT_SUPPORTED = 2
STATUS_NOT_YET_IMPLEMENTED = 3
STATUS_DRM_ERROR = 6
STATUS_TIMEOUT = 8
STATUS_RETRY = 9
STATUS_IO = 12
STATUS_INIT_ERROR = 18
STATUS_NOT_FOUND = 31
STATUS_NOT_INIT = 32
STATUS_NO_DATA = 40


class AmdSmiRetCode(enum.IntEnum):
    """py-interface/amdsmi_exception.py's names for the statuses above."""

    SUCCESS = STATUS_SUCCESS
    ERR_INVAL = STATUS_INVAL
    ERR_NOT_SUPPORTED = STATUS_NOT_SUPPORTED
    NOT_IMPLEMENTED = STATUS_NOT_YET_IMPLEMENTED
    DRM_ERROR = STATUS_DRM_ERROR
    TIMEOUT = STATUS_TIMEOUT
    RETRY = STATUS_RETRY
    ERR_IO = STATUS_IO
    INIT_ERROR = STATUS_INIT_ERROR
    ERR_NOT_FOUND = STATUS_NOT_FOUND
    NOT_INIT = STATUS_NOT_INIT
    NO_DATA = STATUS_NO_DATA


class AmdSmiException(Exception):
    """Base smi exception class (amdsmi_exception.py)."""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code

    def __str__(self) -> str:
        return f"An error occured with code: {self.err_code}"

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(AmdSmiRetCode.RETRY)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    """What amdsmi_interface.py's `_check_res` raises for AMDSMI_STATUS_TIMEOUT."""

    def __init__(self) -> None:
        super().__init__(AmdSmiRetCode.TIMEOUT)


class AmdSmiRetCodeFirstReleases(enum.IntEnum):
    """amdsmi's first releases numbered the statuses otherwise (their amdsmi_wrapper.py: NOT_FOUND 10,
    NO_DATA 14, AMDSMI_LIB_START 1000 = FAIL_LOAD_MODULE, DRM_ERROR 1002, IO 1003, TIMEOUT 1006, RETRY 1008,
    NOT_INIT 1009); `AmdSmiRetCode` names them the same."""

    SUCCESS = 0
    ERR_INVAL = 1
    ERR_NOT_SUPPORTED = 2
    ERR_NOT_FOUND = 10
    NO_DATA = 14
    LIB_START = 1000
    FAIL_LOAD_MODULE = 1000
    DRM_ERROR = 1002
    ERR_IO = 1003
    TIMEOUT = 1006
    RETRY = 1008
    NOT_INIT = 1009


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, received: Any, expected: Any) -> None:
        super().__init__(f"Invalid parameter: actual type {type(received)}, expected type {expected}")


class AmdSmiInitFlags(enum.IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1


class AmdSmiClkType(enum.IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5


class AmdSmiTemperatureType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2


class AmdSmiTemperatureMetric(enum.IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    MAX_HYST = 3
    MIN_HYST = 4
    CRITICAL = 5


class AmdSmiGpuBlock(enum.IntEnum):
    INVALID = 0
    UMC = 1 << 0
    SDMA = 1 << 1
    GFX = 1 << 2
    MMHUB = 1 << 3
    ATHUB = 1 << 4
    PCIE_BIF = 1 << 5
    HDP = 1 << 6
    XGMI_WAFL = 1 << 7
    DF = 1 << 8
    SMN = 1 << 9
    SEM = 1 << 10
    MP0 = 1 << 11
    MP1 = 1 << 12
    FUSE = 1 << 13
    MCA = 1 << 14
    VCN = 1 << 15
    JPEG = 1 << 16
    IH = 1 << 17
    MPIO = 1 << 18
    RESERVED = 1 << 19


class AmdSmiEvtNotificationType(enum.IntEnum):
    NONE = 0
    VMFAULT = 1
    THERMAL_THROTTLE = 2
    GPU_PRE_RESET = 3
    GPU_POST_RESET = 4
    RING_HANG = 5
