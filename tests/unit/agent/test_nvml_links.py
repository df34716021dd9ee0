"""The NVML backend's new readings against the scripted `pynvml` stand-in: NVLinks, their error
counters, the NVSwitch fabric registration, the performance state and the CUDA version, with
NVML's real return codes for "not supported" (3), "invalid argument" (2, a link past the last),
"function not found" (13) and "GPU is lost" (15). No call raises out of the backend."""

from __future__ import annotations

import pynvml

from accelpool_agent.backends.nvml import NvmlBackend
from accelpool_agent.clock import ManualClock

from .fake_nvml import FakeNvml

REPLAY = pynvml.NVML_NVLINK_ERROR_DL_REPLAY
CRC_FLIT = pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT


def backend(nvml: FakeNvml) -> NvmlBackend:
    result = NvmlBackend(nvml, retry_seconds=30, clock=ManualClock().time)
    result.open()
    return result


def test_links_are_probed_up_to_the_last_one_with_their_counters() -> None:
    nvml = FakeNvml(gpus=2, nvlink_down={(1, 5)}, nvlink_errors={(0, 2, REPLAY): 7, (0, 2, CRC_FLIT): 40})
    b = backend(nvml)
    first, second = b.telemetry()
    assert first.nvlinks is not None and len(first.nvlinks) == 18  # link 18 answered INVALID_ARGUMENT
    assert all(link.active for link in first.nvlinks)
    assert dict(first.nvlinks[2].errors) == {"replay": 7, "recovery": 0, "crc_flit": 40, "crc_data": 0}
    assert second.nvlinks is not None and [n.link for n in second.nvlinks if not n.active] == [5]
    assert not b.call_errors  # neither INVALID_ARGUMENT past the last link nor anything else counted as an error


def test_a_gpu_without_nvlink_has_none_and_its_probe_stops_at_once() -> None:
    nvml = FakeNvml(gpus=1, nvlinks=0)
    (reading,) = backend(nvml).telemetry()
    assert reading.nvlinks is None
    nvml.calls = 0
    backend(nvml).telemetry()
    probes = nvml.calls
    assert probes < 40  # one NOT_SUPPORTED answer for the NVLinks, not 36 of them


def test_counters_nvml_no_longer_gives_are_absent_not_zero() -> None:
    nvml = FakeNvml(gpus=1, nvlinks=2)
    nvml.errors[("nvmlDeviceGetNvLinkErrorCounter", None)] = pynvml.NVML_ERROR_NOT_SUPPORTED
    (reading,) = backend(nvml).telemetry()
    assert reading.nvlinks is not None and [dict(n.errors) for n in reading.nvlinks] == [{}, {}]


def test_a_gpu_lost_in_the_middle_of_its_links_is_lost_not_an_error() -> None:
    nvml = FakeNvml(gpus=2)
    nvml.errors[("nvmlDeviceGetNvLinkState", 1)] = pynvml.NVML_ERROR_GPU_IS_LOST
    first, second = backend(nvml).telemetry()
    assert not first.lost and second.lost


def test_fabric_registration_states_and_degraded_bandwidth() -> None:
    done = backend(FakeNvml(gpus=1)).telemetry()[0].fabric
    assert done is not None and (done.state, done.status, done.degraded_bandwidth) == ("completed", 0, False)
    nvml = FakeNvml(
        gpus=1,
        fabric_state=pynvml.NVML_GPU_FABRIC_STATE_COMPLETED,
        fabric_status=pynvml.NVML_ERROR_UNKNOWN,
        fabric_health_mask=pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE,
    )
    failed = backend(nvml).telemetry()[0].fabric
    assert failed is not None and (failed.status, failed.degraded_bandwidth) == (pynvml.NVML_ERROR_UNKNOWN, True)
    waiting = backend(FakeNvml(gpus=1, fabric_state=pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED)).telemetry()[0].fabric
    assert waiting is not None and waiting.state == "not_started"


def test_fabric_not_supported_or_missing_from_the_driver_is_no_data() -> None:
    for code in (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND):
        nvml = FakeNvml(gpus=1)
        nvml.errors[("nvmlDeviceGetGpuFabricInfoV", None)] = code
        b = backend(nvml)
        assert b.telemetry()[0].fabric is None
        assert not b.call_errors


def test_performance_state_and_versions() -> None:
    b = backend(FakeNvml(gpus=1, performance_state=8))
    assert b.telemetry()[0].performance_state == 8
    assert (b.versions().driver, b.versions().cuda) == ("580.65.06", "13.0")
    nvml = FakeNvml(gpus=1, performance_state=32)  # NVML_PSTATE_UNKNOWN
    nvml.errors[("nvmlSystemGetCudaDriverVersion_v2", None)] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    b = backend(nvml)
    assert b.telemetry()[0].performance_state is None
    assert b.versions().cuda is None


def test_the_drivers_recovery_action_and_its_absence() -> None:
    assert backend(FakeNvml(gpus=1)).telemetry()[0].recovery_action == 0
    nvml = FakeNvml(gpus=1, recovery_action=pynvml.NVML_GPU_RECOVERY_ACTION_NODE_REBOOT)
    assert backend(nvml).telemetry()[0].recovery_action == 2
    assert backend(FakeNvml(gpus=1, recovery_action=None)).telemetry()[0].recovery_action is None  # field NOT_SUPPORTED
    old = FakeNvml(gpus=1)
    old.errors[("nvmlDeviceGetFieldValues", None)] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    b = backend(old)
    assert b.telemetry()[0].recovery_action is None
    assert not b.call_errors
