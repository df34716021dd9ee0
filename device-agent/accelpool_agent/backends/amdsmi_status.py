"""amdsmi's status codes by name: what an `AmdSmiLibraryException`'s status means to the amdsmi backend.

amdsmi raises `AmdSmiLibraryException` (py-interface/amdsmi_exception.py; its subclasses
`AmdSmiRetryException` and `AmdSmiTimeoutException` for RETRY and TIMEOUT, as amdsmi_interface.py's
`_check_res` raises them) whose `get_error_code()` is an `amdsmi_status_t` (include/amd_smi/amdsmi.h).
A status is read by its name in the library's own `AmdSmiRetCode` enum, because amdsmi renumbered its
statuses: its first releases had NOT_FOUND 10, NO_DATA 14, DRM_ERROR 1002, IO 1003, TIMEOUT 1006 and
NOT_INIT 1009 (AMDSMI_LIB_START 1000 = FAIL_LOAD_MODULE); ROCm 6 and later number them as
`STATUS_NAMES` does, the fallback for a module without `AmdSmiRetCode`. Pure.
"""

from __future__ import annotations

from typing import Any

STATUS_NAMES = {
    2: "ERR_NOT_SUPPORTED",
    3: "NOT_IMPLEMENTED",
    4: "FAIL_LOAD_MODULE",
    5: "FAIL_LOAD_SYMBOL",
    6: "DRM_ERROR",
    8: "TIMEOUT",
    9: "RETRY",
    12: "ERR_IO",
    18: "INIT_ERROR",
    31: "ERR_NOT_FOUND",
    32: "NOT_INIT",
    40: "NO_DATA",
}
"""amdsmi_status_t values since ROCm 6 → their `AmdSmiRetCode` names."""
NO_DATA_STATUSES = frozenset({"ERR_NOT_SUPPORTED", "NOT_IMPLEMENTED", "NO_DATA"})
""""No data": the GPU or driver does not report this reading."""
LOST_STATUSES = frozenset({"ERR_NOT_FOUND", "ERR_IO", "DRM_ERROR"})
"""The GPU stopped answering: its device is gone (NOT_FOUND) or its sysfs / DRM reads fail."""
DEAD_STATUSES = frozenset({"NOT_INIT", "INIT_ERROR", "FAIL_LOAD_MODULE", "FAIL_LOAD_SYMBOL", "LIB_START"})
"""amdsmi itself is not working: not initialised, or its library failed to load (`LIB_START` is the name
`AmdSmiRetCode` gives FAIL_LOAD_MODULE's value where the two are equal)."""
QUIET_STATUSES = frozenset({"NO_DATA", "TIMEOUT"})
"""What reading events answers when none is waiting (`AmdSmiTimeoutException` is TIMEOUT's class)."""


def error_code(error: BaseException) -> int | None:
    """The status an amdsmi exception carries (`get_error_code()`), or None."""
    get = getattr(error, "get_error_code", None)
    value = get() if callable(get) else None
    return int(value) if isinstance(value, int) else None


def status_name(module: Any, error: BaseException) -> str | None:
    """The `AmdSmiRetCode` name of an exception's status (`ERR_NOT_SUPPORTED`, ...): through `module`'s own
    enum, else `STATUS_NAMES`; None for an exception that carries no status."""
    code = error_code(error)
    if code is None:
        return None
    enum = getattr(module, "AmdSmiRetCode", None)
    try:
        return str(enum(code).name) if enum is not None else STATUS_NAMES.get(code)
    except (ValueError, TypeError):
        return STATUS_NAMES.get(code)
