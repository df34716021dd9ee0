"""Guarded calls into NVML for the nvml backend: what an error code means, decided in one place.

NVML_ERROR_NOT_SUPPORTED (and a function missing from an older driver) means "no data" and
yields None, never an error; a caller probing indexes (NVLinks) also reads
NVML_ERROR_INVALID_ARGUMENT as "no such link" (`get(..., no_data=BEYOND)`).
NVML_ERROR_GPU_IS_LOST raises `GpuLostError` (that GPU is lost for this reading); a dead NVML
(uninitialised, driver unloaded, library or version mismatch) raises `NvmlDeadError`. Other
errors are counted per function and read as no data.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from accelpool_agent.backends.library import DeviceLostError, LibraryDeadError

log = logging.getLogger(__name__)

# NVML constants (nvml.h); read from the module when present, these are the documented values.
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
UNINITIALIZED = 1
LIB_RM_VERSION_MISMATCH = 18
XID_CRITICAL_ERROR_EVENT = 0x8
NO_DATA = frozenset({NOT_SUPPORTED, FUNCTION_NOT_FOUND, NOT_FOUND})
BEYOND = NO_DATA | {INVALID_ARGUMENT}
"""No data, or an index beyond what the device has (a link number past its last NVLink)."""
DEAD = {UNINITIALIZED, DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, LIB_RM_VERSION_MISMATCH}


class GpuLostError(DeviceLostError):
    """NVML_ERROR_GPU_IS_LOST from a device call."""


class NvmlDeadError(LibraryDeadError):
    """NVML itself stopped working (uninitialised, driver unloaded)."""


class NvmlCalls:
    """One NVML module (pynvml, or a test double), every call guarded."""

    def __init__(self, nvml: Any, errors: Counter[str]) -> None:
        self.nvml = nvml
        self.errors = errors
        """Calls that failed for another reason, by NVML function name."""

    @staticmethod
    def code(error: Exception) -> int | None:
        value = getattr(error, "value", None)
        return value if isinstance(value, int) else None

    def get(self, function: str, *args: Any, no_data: frozenset[int] = NO_DATA) -> Any:
        """Call an NVML function: None for "no data", GpuLostError / NvmlDeadError for the serious cases."""
        fn = getattr(self.nvml, function, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError as error:
            code = self.code(error)
            if code in no_data:
                return None
            if code == GPU_IS_LOST:
                raise GpuLostError(f"{function}: {error}") from error
            if code in DEAD:
                raise NvmlDeadError(f"{function}: {error}") from error
            self.errors[function] += 1
            log.debug("%s failed: %s", function, error)
            return None

    def const(self, name: str, default: int) -> int:
        """An NVML constant by name; `default` (nvml.h's documented value) when the module lacks it."""
        value = getattr(self.nvml, name, default)
        return value if isinstance(value, int) else default
